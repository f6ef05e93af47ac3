// Package cli holds what every switchboard command's flag parsing shares,
// so that they behave alike: --help prints the usage on stdout and
// succeeds, as gh, kubectl and go do.
package cli

import (
	"flag"
	"fmt"
	"io"
)

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

// Parse parses args into fs as every command does, and says whether the
// command goes on: help asked for (HelpRequested) is the usage on stdout
// and exit code 0; a bad flag is exit code 2, after the flag package has
// written the error and the usage to fs.Output(); with positional false, an
// argument that is not a flag is a usage error too, named on fs.Output().
// fs must be flag.ContinueOnError and named as the command is typed
// ("switchboard up").
func Parse(fs *flag.FlagSet, args []string, stdout io.Writer, positional bool) (code int, ok bool) {
	if HelpRequested(args) {
		fs.SetOutput(stdout)
		fs.Usage()
		return 0, false
	}
	if err := fs.Parse(args); err != nil {
		return 2, false
	}
	if !positional && fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}
