//go:build !unix

package store

// processAlive cannot probe here; trust the pid file.
func processAlive(pid int) bool { return pid > 0 }
