// Package beneath serves the files beneath one directory as an fs.FS whose every open is confined
// to that directory by the kernel, at the moment of the open: a symbolic link (or a directory
// swapped for one) that leads out of it is refused, whenever it appeared. A check made before the
// read (resolve the path, then open it by name) cannot promise that; the open itself can.
package beneath

import "errors"

// ErrOutside is wrapped by the error of an open whose path leads out of the directory (through a
// symbolic link, absolute or with ".."), or through any symbolic link where the kernel has no
// openat2 (see Open).
var ErrOutside = errors.New("leads outside the folder (through a symbolic link)")

// ErrNotFile is wrapped by the error of opening something that is neither a regular file nor a
// directory (a FIFO would block the reader, a device may never end).
var ErrNotFile = errors.New("not a regular file or directory")
