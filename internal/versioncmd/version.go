// Package versioncmd is `switchboard version`.
package versioncmd

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/switchboard-run/switchboard/internal/cli"
	"github.com/switchboard-run/switchboard/internal/version"
)

// Main prints the version; 2 on any argument.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if cli.HelpRequested(args) {
		fmt.Fprintln(stdout, "usage: switchboard version\n\nPrints the version of this binary (the module version, or (devel) for a\nbuild from a checkout), the commit it was built from, and the Go version.")
		return 0
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "switchboard version: unexpected argument %q\n", args[0])
		return 2
	}
	fmt.Fprintf(stdout, "switchboard %s", version.String())
	if rev := version.Revision(); rev != "" {
		fmt.Fprintf(stdout, " (%s)", rev)
	} else {
		// Said, not left out: a line without a commit reads as if there
		// were none to tell (go build -buildvcs=false, as CI builds, or a
		// build outside a checkout records none).
		fmt.Fprint(stdout, " (no commit recorded in this build)")
	}
	fmt.Fprintf(stdout, " %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
