package main

import (
	"os"

	"github.com/clihost/clihost/control"
)

// socketPath is --socket, else $CLIHOST_SOCKET, else the daemon's default when a daemon listens
// there, else the systemd unit's socket (control.ClientSocket).
func (g *globalOptions) socketPath() string {
	if g.socket != "" {
		return g.socket
	}
	if s := os.Getenv(control.EnvSocket); s != "" {
		return s
	}
	state, err := control.DefaultStateDir()
	if err != nil {
		return control.ClientSocket("")
	}
	return control.ClientSocket(control.DefaultSocket(state))
}

// client connects to the daemon's control socket.
func (g *globalOptions) client() *control.Client { return control.NewClient(g.socketPath()) }
