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
	// copyBuffer is the read size while streaming a download to disk.
	copyBuffer = 256 << 10
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
	if err := in.fetch(ctx, e.URL, e.VerifySHA256, archive); err != nil {
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
	if err := in.fetch(ctx, e.URL, e.VerifySHA256, script); err != nil {
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
// *ChecksumError.
func (in *installer) fetch(ctx context.Context, rawURL, want, dst string) error {
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
	stall := time.AfterFunc(stallTimeout, func() { cancel(errStalled) })
	n, err := in.copyProgress(f, io.LimitReader(resp.Body, in.limits.download+1), h, total, stall)
	stall.Stop()
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

// hashBuffers is how many copy buffers are in flight between the copy loop and the hashing
// goroutine: enough that reading the next chunk never waits for the hash of the last one.
const hashBuffers = 4

// copyProgress copies src to dst and into h, reporting progress and pushing the stall timer back on
// every read. SHA-256 is slower than loopback delivers bytes, so h runs on a goroutine of its own,
// fed the chunks in order, while the next chunk is read and written (BENCHMARKS.md, "The daemon").
func (in *installer) copyProgress(dst io.Writer, src io.Reader, h hash.Hash, total int64, stall *time.Timer) (int64, error) {
	free := make(chan []byte, hashBuffers)
	for range hashBuffers {
		free <- make([]byte, copyBuffer)
	}
	chunks := make(chan []byte, hashBuffers)
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		for c := range chunks {
			h.Write(c) // a hash.Hash never fails to write
			free <- c[:cap(c)]
		}
	}()
	defer func() { close(chunks); <-hashed }() // h holds every chunk written once copyProgress returns
	var n int64
	for {
		buf := <-free
		nr, rerr := src.Read(buf)
		if nr > 0 {
			stall.Reset(stallTimeout)
			if _, err := dst.Write(buf[:nr]); err != nil {
				return n, err
			}
			chunks <- buf[:nr]
			n += int64(nr)
			if in.o.Progress != nil {
				in.o.Progress(n, total)
			}
		} else {
			free <- buf
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
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
