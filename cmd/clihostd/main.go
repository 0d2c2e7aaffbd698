// Command clihostd is the clihost daemon. This release loads and validates the configured bundles
// (the embedded catalog by default), reports which are usable, reloads them on SIGHUP and runs until
// SIGINT or SIGTERM. The lifecycle (install, version check, setup, auth), the control socket and the
// MCP endpoints arrive in later releases (see the issues).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/clihost/clihost/registry"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("clihostd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var dirs stringList
	fs.Var(&dirs, "bundles", "a bundle directory (repeatable); default $CLIHOST_BUNDLES, else ./.cli plus the embedded catalog")
	once := fs.Bool("check", false, "load and validate the bundles, print the result and exit (1 when any bundle is refused)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	log.Info("clihostd starting", "version", version)

	refused, err := load(log, dirs)
	if err != nil {
		log.Error("loading bundles failed", "err", err)
		return 1
	}
	if *once {
		if refused > 0 {
			return 1
		}
		return 0
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	log.Info("clihostd ready; SIGHUP reloads bundles, SIGTERM stops")
	for {
		select {
		case <-ctx.Done():
			log.Info("clihostd stopping")
			return 0
		case <-hup:
			log.Info("reloading bundles")
			if _, err := load(log, dirs); err != nil {
				log.Error("reload failed; keeping the previous bundles", "err", err)
			}
		}
	}
}

// load reads every bundle source and logs each bundle as loaded or refused (a bundle with lint
// errors is refused). It returns the number refused.
func load(log *slog.Logger, dirs []string) (int, error) {
	sources, err := registry.DefaultSources(dirs)
	if err != nil {
		return 0, err
	}
	reg, err := registry.Load(sources...)
	if err != nil {
		return 0, err
	}
	refused := 0
	for _, e := range reg.Entries() {
		b := e.Bundle
		errs, warns := b.Findings.Count()
		if errs > 0 || !e.Indexed {
			refused++
			log.Warn("bundle refused", "bundle", b.Key(), "file", b.File, "errors", errs,
				"hint", fmt.Sprintf("run: clihostctl lint %s", b.Dir))
			continue
		}
		log.Info("bundle loaded", "bundle", b.Key(), "source", e.Source, "tools", len(b.Tools), "warnings", warns)
	}
	for _, f := range reg.Findings {
		log.Warn("registry", "finding", f.String())
	}
	return refused, nil
}
