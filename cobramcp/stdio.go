package cobramcp

import (
	"context"
	"errors"
	"fmt"
	"os"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio runs server on this process's stdin and stdout, protected from the commands it runs
// (on Linux): the MCP session reads a duplicate of descriptor 0 and writes a duplicate of
// descriptor 1; while it runs, descriptor 0 reads /dev/null and descriptor 1 writes to stderr, so
// nothing but the session's messages reaches the client's stdout, and a command reading stdin
// reads nothing of the session. Each call of a server built with CaptureProcessOutput (ServeMCP
// sets it) points 1 and 2 at its own pipes. The descriptors are restored when the session ends.
func ServeStdio(ctx context.Context, server *sdk.Server) error {
	if !captureFDs {
		return server.Run(ctx, &sdk.StdioTransport{})
	}
	s, err := takeStdio()
	if err != nil {
		return err
	}
	runErr := server.Run(ctx, &sdk.IOTransport{Reader: s.in, Writer: s.out})
	return errors.Join(runErr, s.restore())
}

// heldStdio is the session's copies of descriptors 0 and 1, and the originals to restore.
type heldStdio struct {
	in, out           *os.File
	savedIn, savedOut int
}

// takeStdio moves the process's stdin and stdout aside for the MCP session.
func takeStdio() (*heldStdio, error) {
	if err := lockStdio(context.Background()); err != nil {
		return nil, err
	}
	defer unlockStdio()
	var fds [4]int
	for i, fd := range []int{0, 1, 0, 1} {
		d, err := dupCloexec(fd)
		if err != nil {
			for _, o := range fds[:i] {
				closeFD(o)
			}
			return nil, fmt.Errorf("duplicate descriptor %d: %w", fd, err)
		}
		fds[i] = d
	}
	h := &heldStdio{in: os.NewFile(uintptr(fds[0]), "mcp-stdin"), out: os.NewFile(uintptr(fds[1]), "mcp-stdout"),
		savedIn: fds[2], savedOut: fds[3]}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", os.DevNull, err), h.close())
	}
	defer null.Close()
	if err := redirect(null, 0); err != nil {
		return nil, errors.Join(err, h.close())
	}
	if err := dup3(2, 1); err != nil {
		return nil, errors.Join(fmt.Errorf("point descriptor 1 at stderr: %w", err), h.restoreLocked())
	}
	return h, nil
}

// restore points descriptors 0 and 1 back at the process's stdin and stdout.
func (h *heldStdio) restore() error {
	if err := lockStdio(context.Background()); err != nil {
		return err
	}
	defer unlockStdio()
	return h.restoreLocked()
}

func (h *heldStdio) restoreLocked() error {
	var errs []error
	if err := dup3(h.savedIn, 0); err != nil {
		errs = append(errs, fmt.Errorf("restore descriptor 0: %w", err))
	}
	if err := dup3(h.savedOut, 1); err != nil {
		errs = append(errs, fmt.Errorf("restore descriptor 1: %w", err))
	}
	return errors.Join(append(errs, h.close())...)
}

func (h *heldStdio) close() error {
	closeFD(h.savedIn)
	closeFD(h.savedOut)
	h.in.Close()
	h.out.Close()
	return nil
}
