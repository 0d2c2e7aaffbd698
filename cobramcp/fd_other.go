//go:build !linux

package cobramcp

import (
	"errors"
	"os"
)

// captureFDs says whether this platform can repoint descriptors 0, 1 and 2: only Linux does;
// elsewhere a call captures what the command writes to cmd.OutOrStdout() and cmd.OutOrStderr().
const captureFDs = false

var errNoCapture = errors.New("descriptor capture needs Linux")

func blockingPipe() (r, w *os.File, err error) { return nil, nil, errNoCapture }
func dupCloexec(int) (int, error)              { return -1, errNoCapture }
func dup3(int, int) error                      { return errNoCapture }
func redirect(*os.File, int) error             { return errNoCapture }
func closeFD(int)                              {}
