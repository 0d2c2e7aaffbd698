package main

import "os"

// TODO: flags
func main() {
	f, err := os.Open("x")
	if err != nil {
		return
	}
	if _, err := f.Stat(); err != nil {
		return // TODO: report
	}
}
