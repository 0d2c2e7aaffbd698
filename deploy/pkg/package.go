package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// Where the package puts things. The helper must stay beside clihostd and clihostctl: both look
// for clihost-sandbox in the folder of their own executable.
const (
	binDir      = "/usr/bin"
	unitPath    = "/usr/lib/systemd/system/clihostd.service"
	sysusersDst = "/usr/lib/sysusers.d/clihost.conf"
	bundlesDir  = "/etc/clihost/bundles"
)

// layout is where the package's files come from.
type layout struct {
	root  string // the repository
	bin   string // the built binaries
	unit  string // the unit rewritten for the package's paths
	share string // the generated files for /usr/share: manual pages, completion scripts
}

// execStart is the packaged unit's ExecStart line: the packaged clihostd, with or without flags.
var execStart = regexp.MustCompile(`(?m)^ExecStart=` + regexp.QuoteMeta(binDir) + `/clihostd(\s|$)`)

// packagedUnit writes deploy/clihostd.service as the package installs it: ExecStart runs
// /usr/bin/clihostd instead of /usr/local/bin/clihostd, and the comment on installing by hand is
// replaced by one naming the package. It returns the written file's path.
func packagedUnit(root, dir string) (string, error) {
	src := filepath.Join(root, "deploy", "clihostd.service")
	data, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("reading the unit: %w", err)
	}
	text := string(data)
	if i := strings.Index(text, "\n["); i >= 0 && strings.HasPrefix(text, "#") {
		text = text[i+1:]
	}
	text = strings.ReplaceAll(text, "/usr/local/bin/", binDir+"/")
	if !execStart.MatchString(text) {
		return "", fmt.Errorf("%s: ExecStart does not run %s/clihostd after rewriting /usr/local/bin", src, binDir)
	}
	header := "# clihostd as a systemd service, installed by the clihost package (its postinst created the\n" +
		"# user clihost, its group and /srv/clihost/workspace). Put bundles in /etc/clihost/bundles; override\n" +
		"# settings with systemctl edit clihostd; see docs/operations.md.\n"
	out := filepath.Join(dir, "clihostd.service")
	return out, os.WriteFile(out, []byte(header+text), 0o644)
}

// contents are the package's files: the binaries, the unit, the sysusers.d entry, the bundles
// folder, clihostctl's manual pages and completion scripts, and every file under deploy/etc as a configuration file (a dpkg conffile, an RPM
// %config(noreplace)): an operator's edits survive upgrades.
func contents(l layout) (files.Contents, error) {
	c := files.Contents{}
	add := func(src, dst, typ string, mode os.FileMode) {
		c = append(c, &files.Content{Source: src, Destination: dst, Type: typ,
			FileInfo: &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode}})
	}
	for _, b := range binaries {
		add(filepath.Join(l.bin, b), binDir+"/"+b, files.TypeFile, 0o755)
	}
	add(l.unit, unitPath, files.TypeFile, 0o644)
	add(filepath.Join(l.root, "deploy", "clihost.sysusers"), sysusersDst, files.TypeFile, 0o644)
	add("", bundlesDir, files.TypeDir, 0o755)
	err := filepath.WalkDir(l.share, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(l.share, p)
		if err != nil {
			return err
		}
		add(p, "/usr/share/"+filepath.ToSlash(rel), files.TypeFile, 0o644)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("collecting the manual pages and completions: %w", err)
	}
	etc := filepath.Join(l.root, "deploy", "etc")
	err = filepath.WalkDir(etc, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: only regular files are packaged as configuration", p)
		}
		rel, err := filepath.Rel(etc, p)
		if err != nil {
			return err
		}
		add(p, "/etc/"+filepath.ToSlash(rel), files.TypeConfigNoReplace, 0o644)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("collecting deploy/etc: %w", err)
	}
	return c, nil
}

// scripts are each format's maintainer scripts, in deploy/pkg/scripts/FORMAT.
var scripts = map[string]func(dir string) nfpm.Scripts{
	"deb": func(dir string) nfpm.Scripts {
		return nfpm.Scripts{PostInstall: dir + "/postinst", PreRemove: dir + "/prerm", PostRemove: dir + "/postrm"}
	},
	"rpm": func(dir string) nfpm.Scripts {
		return nfpm.Scripts{PostInstall: dir + "/post", PreRemove: dir + "/preun", PostRemove: dir + "/postun"}
	},
}

// writePackage builds one package of format into out and returns its path.
func writePackage(l layout, format, version, out string) (string, error) {
	script, ok := scripts[format]
	if !ok {
		return "", fmt.Errorf("unknown package format %q: use deb or rpm", format)
	}
	packager, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	c, err := contents(l)
	if err != nil {
		return "", err
	}
	mtime, err := commitTime(l.root)
	if err != nil {
		return "", err
	}
	info := &nfpm.Info{
		Name: "clihost", Arch: "amd64", Platform: "linux", Version: version, VersionSchema: "none",
		Section: "admin", Priority: "optional", MTime: mtime,
		Maintainer:  "clihost maintainers <maintainers@clihost.invalid>",
		Homepage:    "https://github.com/clihost/clihost",
		Description: description,
		Overridables: nfpm.Overridables{
			Contents: c,
			Scripts:  script(filepath.Join(l.root, "deploy", "pkg", "scripts", format)),
			RPM:      nfpm.RPM{Summary: "CLI bundles served to AI agents over MCP, in a kernel sandbox", Group: "System Environment/Daemons"},
		},
	}
	if format == "rpm" {
		info.Release = "1"
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, format); err != nil {
		return "", fmt.Errorf("%s: %w", format, err)
	}
	name := map[string]string{
		"deb": "clihost_" + version + "_amd64.deb",
		"rpm": "clihost-" + version + "-1.x86_64.rpm",
	}[format]
	path := filepath.Join(out, name)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := packager.Package(info, f); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("building the %s: %w", format, err)
	}
	return path, f.Close()
}

// description is the packages' long description (its first line is Debian's synopsis).
const description = `CLI bundles served to AI agents over MCP, in a kernel sandbox
clihostd serves command-line tools described by bundles (CLI.md, TOOL.md) to AI agents over MCP,
running each call under namespaces, Landlock, seccomp and an egress proxy. The package installs
clihostd, clihostctl and the clihost-sandbox helper, the clihostd systemd unit and its service
user clihost.`
