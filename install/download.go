package install

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/sandbox"
)

const (
	// stallTimeout abandons a download whose body delivers nothing for this long.
	stallTimeout = time.Minute
	// scriptTimeout bounds a curl method's installer script.
	scriptTimeout = 10 * time.Minute
)

// errStalled is the cause set when a download stops delivering data.
var errStalled = fmt.Errorf("no data received for %s", stallTimeout)

// defaultClient is the HTTP client used when Options.HTTPClient is nil.
var defaultClient = sync.OnceValue(func() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment, // the process environment, not Options.LookupEnv
			DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConns:          10,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("refusing a redirect from https to %s", req.URL.Redacted())
			}
			return nil
		},
	}
})

// download runs a download entry: fetch and verify, then extract the binary or take the download
// as the binary, and place it.
func (in *installer) download(ctx context.Context, e manifest.InstallMethod) (string, error) {
	if e.URL == "" {
		return "", errors.New("the entry has no url")
	}
	tmp, err := in.tempDir()
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	archive := filepath.Join(tmp, "download")
	// Without extract_bin the download can only be the binary itself, which place will fsync: write
	// it through to the disk as it arrives. An archive is read back at once and never fsynced.
	if err := in.fetch(ctx, e.URL, e.VerifySHA256, archive, e.ExtractBin == ""); err != nil {
		return "", err
	}
	f, err := sniff(archive)
	if err != nil {
		return "", fmt.Errorf("%s: %w", redact(e.URL), err)
	}
	bin := archive
	if f == formatRaw {
		if st, err := os.Stat(archive); err != nil {
			return "", err
		} else if st.Size() > in.limits.binary {
			return "", fmt.Errorf("%s: the binary is %d bytes, more than the %d allowed", redact(e.URL), st.Size(), in.limits.binary)
		}
	} else {
		bin = filepath.Join(tmp, "extracted")
		if err := extract(f, archive, e.ExtractBin, bin, in.limits); err != nil {
			return "", fmt.Errorf("%s (%s): %w", redact(e.URL), f, err)
		}
	}
	return in.place(bin)
}

// curl runs a curl entry: fetch and verify the installer script, run it with /bin/sh, then find
// the bundle's bin on PATH.
func (in *installer) curl(ctx context.Context, e manifest.InstallMethod) (string, error) {
	if e.URL == "" {
		return "", errors.New("the entry has no url")
	}
	if e.VerifySHA256 == "" {
		if !in.o.AllowUnverified {
			return "", errors.New("refused: a curl installer without verify_sha256 would run unverified code " +
				"(add verify_sha256 to the entry, or let the operator allow unverified installers)")
		}
		in.log.Warn("running an installer script without a checksum", "bundle", in.key, "url", redact(e.URL))
	}
	tmp, err := in.tempDir()
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	script := filepath.Join(tmp, "install.sh")
	if err := in.fetch(ctx, e.URL, e.VerifySHA256, script, false); err != nil {
		return "", err
	}
	env, _ := sandbox.Env(in.o.LookupEnv, append([]string{"PATH", "HOME"}, proxyVars...), nil)
	if err := in.exec(ctx, "/bin/sh", []string{script}, tmp, env, scriptTimeout); err != nil {
		return "", err
	}
	return in.findBin()
}

// fetch streams rawURL into the new file dst, hashing it on the way (one pass), and checks the
// hash against want when want is set. On a mismatch dst is removed and the error is a
// *ChecksumError. through writes the file through to the disk as it arrives (fileWriter), for a
// file that will be fsynced.
func (in *installer) fetch(ctx context.Context, rawURL, want, dst string, through bool) error {
	if want != "" {
		w, err := parseSHA256(want)
		if err != nil {
			return err
		}
		want = w
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("url %q: %w", rawURL, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Errorf("url %s: only http and https are fetched", u.Redacted())
	}
	shown := u.Redacted()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", shown, err)
	}
	resp, err := in.o.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", shown, resp.Status)
	}
	total := resp.ContentLength
	if total > in.limits.download {
		return fmt.Errorf("GET %s: %d bytes announced, more than the %d allowed", shown, total, in.limits.download)
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("GET %s: %w", shown, err)
	}
	h := sha256.New()
	n, err := in.fetchInto(f, resp.Body, h, total, cancel, through)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil && errors.Is(context.Cause(ctx), errStalled):
		err = fmt.Errorf("GET %s: %w after %d bytes", shown, errStalled, n)
	case err != nil:
		err = fmt.Errorf("GET %s: after %d bytes: %w", shown, n, err)
	case n > in.limits.download:
		err = fmt.Errorf("GET %s: more than the %d bytes allowed", shown, in.limits.download)
	case total >= 0 && n != total:
		err = fmt.Errorf("GET %s: %d bytes received, %d announced", shown, n, total)
	}
	if err != nil {
		os.Remove(dst)
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); want != "" && got != want {
		os.Remove(dst)
		return &ChecksumError{URL: shown, Expected: want, Actual: got}
	}
	return nil
}

// fetchInto copies body (at most the download limit and one byte) into f and h under the stall
// timer, which cancels the request when the body delivers nothing for stallTimeout.
func (in *installer) fetchInto(f *os.File, body io.Reader, h hash.Hash, total int64, cancel context.CancelCauseFunc, through bool) (int64, error) {
	w, err := newFileWriter(f, total, through)
	if err != nil {
		return 0, err
	}
	stall := time.AfterFunc(stallTimeout, func() { cancel(errStalled) })
	defer stall.Stop()
	return in.copyProgress(w, io.LimitReader(body, in.limits.download+1), h, total, stall)
}

// parseSHA256 checks a verify_sha256 value and returns it in lower case.
func parseSHA256(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if b, err := hex.DecodeString(s); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("verify_sha256 %q is not 64 hex digits", s)
	}
	return s, nil
}

// redact removes the password from a URL for messages; an unparsable URL is shown as is.
func redact(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		return u.Redacted()
	}
	return rawURL
}
