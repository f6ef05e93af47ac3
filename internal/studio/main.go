package studio

import (
	"context"
	"fmt"
	"io"
)

// Main runs the command with args (after its own name) and returns the exit
// code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "not implemented yet")
	return 2
}
