package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/internal/config"
)

// configEnv names clihostctl's configuration file instead of the default ("" for none).
const configEnv = "CLIHOSTCTL_CONFIG"

// commandLineOnly are the flags without a key in the configuration file.
var commandLineOnly = []string{"help", "version"}

// configError is a configuration file clihostctl refuses: exit code 2 as a usage error, but the
// hint names how to read no file instead of the command's --help, which says nothing of it.
type configError struct{ error }

// configHint is what a configError's message ends with.
const configHint = "fix the file, or read none with " + configEnv + `=""` + " (docs/operations.md, Configuration file)"

// configFile is the configuration file to read and whether it was named ($CLIHOSTCTL_CONFIG,
// required then), else $XDG_CONFIG_HOME/clihost/clihostctl.yaml (read when it exists).
func configFile() (path string, named bool) {
	if p, ok := os.LookupEnv(configEnv); ok {
		return p, true
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", false
	}
	return filepath.Join(dir, "clihost", "clihostctl.yaml"), false
}

// withConfigFile makes root read the configuration file before any command runs (before a
// PersistentPreRunE root already had): its keys fill in the flags not given on the command line.
func withConfigFile(root *cobra.Command) {
	prev := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if err := applyConfigFile(root, cmd); err != nil {
			return configError{err}
		}
		if prev != nil {
			return prev(cmd, args)
		}
		return nil
	}
}

// applyConfigFile applies the configuration file to running, a command of root's tree.
func applyConfigFile(root, running *cobra.Command) error {
	path, named := configFile()
	if path == "" {
		return nil
	}
	data, err := config.ReadFile(path, named)
	if err != nil || data == nil {
		return err
	}
	return config.Apply(path, data, configSection(root, running))
}

// configSection is the section of c: its own flags, set when c is running or one of its parents,
// and a section per subcommand.
func configSection(c, running *cobra.Command) *config.Section {
	active := false
	for r := running; r != nil && !active; r = r.Parent() {
		active = r == c
	}
	s := config.FromPFlags(c.LocalFlags(), active, commandLineOnly...)
	s.Sections = map[string]*config.Section{}
	for _, sub := range c.Commands() {
		if _, clash := s.Sections[sub.Name()]; clash {
			panic(fmt.Sprintf("two commands named %s", sub.Name()))
		}
		s.Sections[sub.Name()] = configSection(sub, running)
	}
	return s
}
