package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// completionPaths are where each shell looks for clihostctl's completion script in a package,
// under /usr/share (Debian's and Fedora's bash-completion, zsh and fish vendor folders).
var completionPaths = map[string]string{
	"bash": "bash-completion/completions/clihostctl",
	"zsh":  "zsh/vendor-completions/_clihostctl",
	"fish": "fish/vendor_completions.d/clihostctl.fish",
}

// generateShare writes, under dir/share, what the package installs in /usr/share: clihostctl's
// manual pages (man/man1/*.1.gz, gzip as Debian policy asks) and its completion scripts, made by
// the built clihostctl in bin (clihostctl man, clihostctl completion SHELL). It returns dir/share.
func generateShare(bin, dir string) (string, error) {
	share := filepath.Join(dir, "share")
	pages := filepath.Join(dir, "man")
	if err := ctl(bin, nil, "man", pages); err != nil {
		return "", err
	}
	man1 := filepath.Join(share, "man", "man1")
	if err := os.MkdirAll(man1, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(pages)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if err := gzipFile(filepath.Join(pages, e.Name()), filepath.Join(man1, e.Name()+".gz")); err != nil {
			return "", err
		}
	}
	for shell, rel := range completionPaths {
		dst := filepath.Join(share, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		f, err := os.Create(dst)
		if err != nil {
			return "", err
		}
		err = ctl(bin, f, "completion", shell)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
	}
	return share, nil
}

// ctl runs the built clihostctl with args (stdout to out, when given), reading no configuration
// file of the machine that builds the package.
func ctl(bin string, out io.Writer, args ...string) error {
	cmd := exec.Command(filepath.Join(bin, "clihostctl"), args...)
	cmd.Env = append(os.Environ(), "CLIHOSTCTL_CONFIG=")
	cmd.Stdout, cmd.Stderr = out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("clihostctl %v: %w", args, err)
	}
	return nil
}

// gzipFile writes src gzipped to dst, with no name or time in the header (reproducible).
func gzipFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		f.Close()
		return err
	}
	if _, err := zw.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
