// Package cli holds what every switchboard command's flag parsing shares,
// so that they behave alike: --help prints the usage on stdout and
// succeeds, as gh, kubectl and go do.
package cli

// HelpRequested reports whether args ask for help (-h, -help, --help,
// before a "--"). The flag package would print the usage on the error
// stream and fail; a person who asked for help gets it on stdout with exit
// status 0.
func HelpRequested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help", "-h=true", "-help=true", "--help=true":
			return true
		}
	}
	return false
}
