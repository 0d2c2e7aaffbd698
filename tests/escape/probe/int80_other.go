//go:build !amd64

package main

// int80Child reports that this architecture has no i386 ABI to try.
func int80Child([]string) report {
	return report{Result: "denied", Step: "probe", Detail: "int $0x80 exists on amd64 only"}
}
