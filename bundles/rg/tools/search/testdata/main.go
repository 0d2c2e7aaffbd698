package main

import "os"

// ParseArgv returns the arguments after the program name.
func ParseArgv(args []string) []string { return args[1:] }

func main() {
	if len(ParseArgv(os.Args)) == 0 {
		os.Exit(2)
	}
}
