//go:build !(darwin || dragonfly || freebsd || netbsd || openbsd || aix || linux || solaris || zos)

package askcmd

// isTerminalFd says no where ask cannot tell: then an elicitation is
// declined (the server does nothing it wanted confirmed), the safe side.
func isTerminalFd(uintptr) bool { return false }
