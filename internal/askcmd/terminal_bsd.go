//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package askcmd

import "golang.org/x/sys/unix"

func isTerminalFd(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TIOCGETA)
	return err == nil
}
