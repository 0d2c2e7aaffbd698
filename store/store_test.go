package store

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func openT(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// checkDB runs bbolt's own consistency check over the whole file.
func checkDB(t testing.TB, s *Store) {
	t.Helper()
	err := s.db.View(func(tx *bolt.Tx) error {
		var first error
		for err := range tx.Check() { // drain: the checker goroutine sends every error
			if first == nil {
				first = err
			}
		}
		return first
	})
	if err != nil {
		t.Fatalf("bbolt consistency check: %v", err)
	}
}

type state struct {
	Phase string `json:"phase"`
	N     int    `json:"n"`
}

func TestOpenCreatesPrivateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "state")
	s := openT(t, dir)
	if s.Dir() != dir {
		t.Errorf("Dir() = %q, want %q", s.Dir(), dir)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o700 {
		t.Errorf("state dir mode %04o, want 0700", perm)
	}
	st, err = os.Stat(filepath.Join(dir, DBFile))
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("state.db mode %04o, want no group/other access", perm)
	}
	pid, err := os.ReadFile(filepath.Join(dir, PIDFile))
	if err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("pid file = %q, %v; want our pid", pid, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, PIDFile)); !os.IsNotExist(err) {
		t.Errorf("pid file still present after Close: %v", err)
	}
}

func TestPutGetVersions(t *testing.T) {
	s := openT(t, t.TempDir())
	var got state
	if _, ok, err := s.Get(BucketSetup, "k", &got); ok || err != nil {
		t.Fatalf("Get absent = ok %v, err %v", ok, err)
	}
	before := time.Now()
	for i := 1; i <= 3; i++ {
		v, err := s.Put(BucketSetup, "k", state{Phase: "done", N: i})
		if err != nil {
			t.Fatal(err)
		}
		if v != uint64(i) {
			t.Fatalf("Put #%d version = %d", i, v)
		}
	}
	rec, ok, err := s.Get(BucketSetup, "k", &got)
	if err != nil || !ok {
		t.Fatalf("Get = ok %v, err %v", ok, err)
	}
	if rec.Version != 3 || got != (state{"done", 3}) {
		t.Errorf("Get = %+v / %+v", rec, got)
	}
	if rec.Updated.Before(before.Add(-time.Second)) || rec.Updated.After(time.Now().Add(time.Second)) {
		t.Errorf("Updated = %v, not around now", rec.Updated)
	}
	if string(rec.Data) != `{"phase":"done","n":3}` {
		t.Errorf("Data = %s", rec.Data)
	}
	// nil v only returns the record.
	if rec2, ok, err := s.Get(BucketSetup, "k", nil); err != nil || !ok || rec2.Version != 3 {
		t.Errorf("Get(nil) = %+v %v %v", rec2, ok, err)
	}
	// decode error still returns the record.
	var wrong []int
	if rec2, ok, err := s.Get(BucketSetup, "k", &wrong); err == nil || !ok || rec2.Version != 3 {
		t.Errorf("Get(wrong type) = %+v %v %v, want record and error", rec2, ok, err)
	}
	// Buckets are independent.
	if _, ok, _ := s.Get(BucketAuth, "k", nil); ok {
		t.Error("key leaked into another bucket")
	}
	if err := s.Delete(BucketSetup, "k"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(BucketSetup, "k", nil); ok {
		t.Error("present after Delete")
	}
	if err := s.Delete(BucketSetup, "k"); err != nil {
		t.Errorf("Delete of missing key: %v", err)
	}
	if v, err := s.Put(BucketSetup, "k", 1); err != nil || v != 1 {
		t.Errorf("Put after Delete = %d, %v; want version 1", v, err)
	}
	// A new bucket is created on first write.
	if v, err := s.Put("custom", "x", "y"); err != nil || v != 1 {
		t.Errorf("Put to new bucket = %d, %v", v, err)
	}
	checkDB(t, s)
}

func TestPersistsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(BucketInstall, "gh@2", state{"installed", 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(BucketInstall, "gh@2", state{"installed", 8}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir)
	var got state
	rec, ok, err := s.Get(BucketInstall, "gh@2", &got)
	if err != nil || !ok || rec.Version != 2 || got.N != 8 {
		t.Fatalf("after reopen: %+v %+v %v %v", rec, got, ok, err)
	}
}

func TestUpdate(t *testing.T) {
	s := openT(t, t.TempDir())
	v, err := s.Update(BucketAuth, "k", func(cur Record) (any, error) {
		if cur.Version != 0 || cur.Data != nil {
			t.Errorf("absent cur = %+v", cur)
		}
		return state{"a", 1}, nil
	})
	if err != nil || v != 1 {
		t.Fatalf("Update = %d, %v", v, err)
	}
	v, err = s.Update(BucketAuth, "k", func(cur Record) (any, error) {
		var st state
		if err := json.Unmarshal(cur.Data, &st); err != nil {
			return nil, err
		}
		if cur.Version != 1 || st.N != 1 {
			t.Errorf("cur = %+v %+v", cur, st)
		}
		st.N++
		return st, nil
	})
	if err != nil || v != 2 {
		t.Fatalf("Update = %d, %v", v, err)
	}

	// An error from fn writes nothing and comes back wrapped.
	boom := errors.New("boom")
	if _, err := s.Update(BucketAuth, "k", func(Record) (any, error) { return state{"x", 99}, boom }); !errors.Is(err, boom) {
		t.Fatalf("Update error = %v, want wrapping boom", err)
	}
	var st state
	if rec, _, _ := s.Get(BucketAuth, "k", &st); rec.Version != 2 || st.N != 2 {
		t.Errorf("failed Update wrote: %+v %+v", rec, st)
	}
	// A value that does not encode writes nothing.
	if _, err := s.Update(BucketAuth, "k", func(Record) (any, error) { return make(chan int), nil }); err == nil {
		t.Error("Update with unencodable value succeeded")
	}
	// A panic in fn rolls back and leaves the store usable.
	func() {
		defer func() { _ = recover() }()
		_, _ = s.Update(BucketAuth, "k", func(Record) (any, error) { panic("fn panicked") })
	}()
	if rec, _, _ := s.Get(BucketAuth, "k", nil); rec.Version != 2 {
		t.Errorf("after panic: version %d", rec.Version)
	}

	// (nil, nil) deletes.
	v, err = s.Update(BucketAuth, "k", func(Record) (any, error) { return nil, nil })
	if err != nil || v != 0 {
		t.Fatalf("delete via Update = %d, %v", v, err)
	}
	if _, ok, _ := s.Get(BucketAuth, "k", nil); ok {
		t.Error("present after Update returned nil")
	}
	// Deleting an absent key via Update is fine.
	if _, err := s.Update(BucketAuth, "none", func(Record) (any, error) { return nil, nil }); err != nil {
		t.Error(err)
	}
}

func TestUpdateConcurrentNoLostIncrements(t *testing.T) {
	s := openT(t, t.TempDir())
	const goroutines, each = 50, 20
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				_, err := s.Update(BucketMeta, "counter", func(cur Record) (any, error) {
					n := 0
					if cur.Data != nil {
						if err := json.Unmarshal(cur.Data, &n); err != nil {
							return nil, err
						}
					}
					return n + 1, nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var n int
	rec, ok, err := s.Get(BucketMeta, "counter", &n)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if n != goroutines*each || rec.Version != goroutines*each {
		t.Errorf("counter = %d, version %d; want %d", n, rec.Version, goroutines*each)
	}
}

func TestList(t *testing.T) {
	s := openT(t, t.TempDir())
	keys := []string{
		ScopeKey("gh@2", "/w/a", "alice"),
		ScopeKey("gh@2", "/w/b", "bob"),
		ScopeKey("gh@20", "/w/a", "alice"),
		ScopeKey("gh@2x", "/w", "u"),
		ScopeKey("jq@1", "/w", "u"),
	}
	for i, k := range keys {
		if _, err := s.Put(BucketSetup, k, i); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err := s.List(BucketSetup, ScopePrefix("gh@2"), func(k string, rec Record) error {
		if rec.Version != 1 {
			t.Errorf("%q version %d", k, rec.Version)
		}
		got = append(got, k)
		// fn runs outside the read transaction: writing from it must not deadlock.
		_, err := s.Put(BucketMeta, "seen/"+k, true)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{keys[0], keys[1]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("List(gh@2) = %q, want %q", got, want)
	}
	var all []string
	if err := s.List(BucketSetup, "", func(k string, _ Record) error { all = append(all, k); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(all); i++ {
		if all[i-1] >= all[i] {
			t.Errorf("List not in key order: %q", all)
		}
	}
	if len(all) != len(keys) {
		t.Errorf("List all = %d keys, want %d", len(all), len(keys))
	}
	stop := errors.New("stop")
	n := 0
	if err := s.List(BucketSetup, "", func(string, Record) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("List stop = %v after %d", err, n)
	}
	if err := s.List("nosuchbucket", "", func(string, Record) error { t.Error("called"); return nil }); err != nil {
		t.Errorf("List missing bucket: %v", err)
	}
}

func TestBadArguments(t *testing.T) {
	s := openT(t, t.TempDir())
	if _, err := s.Put(bucketSecrets, "k", 1); err == nil {
		t.Error("Put to the secrets bucket allowed")
	}
	if err := s.List(bucketSecrets, "", func(string, Record) error { return nil }); err == nil {
		t.Error("List of the secrets bucket allowed")
	}
	if _, err := s.Put("", "k", 1); err == nil {
		t.Error("empty bucket allowed")
	}
	if _, err := s.Put(BucketMeta, "", 1); err == nil {
		t.Error("empty key allowed")
	}
	if _, _, err := s.Get(BucketMeta, "", nil); err == nil {
		t.Error("empty key allowed")
	}
	if _, err := Open("", Options{}); err == nil {
		t.Error("empty dir allowed")
	}
}

func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir, Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only Open of a missing database succeeded")
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(BucketInstall, "gh@2", "ok"); err != nil {
		t.Fatal(err)
	}
	s.Close()

	r1, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := Open(dir, Options{ReadOnly: true}) // shared lock: readers coexist
	if err != nil {
		t.Fatalf("second read-only Open: %v", err)
	}
	defer r2.Close()
	var v string
	if _, ok, err := r2.Get(BucketInstall, "gh@2", &v); err != nil || !ok || v != "ok" {
		t.Errorf("read-only Get = %q %v %v", v, ok, err)
	}
	if _, err := r1.Put(BucketInstall, "gh@2", "x"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Put = %v, want ErrReadOnly", err)
	}
	if _, err := r1.Update(BucketInstall, "gh@2", func(Record) (any, error) { return 1, nil }); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Update = %v, want ErrReadOnly", err)
	}
	if err := r1.Delete(BucketInstall, "gh@2"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Delete = %v, want ErrReadOnly", err)
	}
	// A writer cannot join readers.
	if _, err := Open(dir, Options{LockTimeout: -1}); !errors.Is(err, ErrLocked) {
		t.Errorf("writable Open beside readers = %v, want ErrLocked", err)
	}
}

// Within one process a second Open also fails: flock is per open file
// description, not per process.
func TestOpenTwiceInProcess(t *testing.T) {
	dir := t.TempDir()
	openT(t, dir)
	_, err := Open(dir, Options{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("message %q does not name the directory and our pid", msg)
	}
}

func TestLockedMessageWithoutLivePid(t *testing.T) {
	dir := t.TempDir()
	// A stale pid file (no such process) must not be reported as the holder.
	if err := os.WriteFile(filepath.Join(dir, PIDFile), []byte("999999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	msg := lockedErr(dir).Error()
	if strings.Contains(msg, "999999999") || !strings.Contains(msg, "fuser") || !strings.Contains(msg, dir) {
		t.Errorf("stale pid message = %q", msg)
	}
	if !errors.Is(lockedErr(dir), ErrLocked) {
		t.Error("lockedErr does not wrap ErrLocked")
	}
}

func TestScopeKey(t *testing.T) {
	tricky := []string{"", "a", ",", ":", "1:a,", "0:,", "a\x00b", "gh@2", "gh@20", "10:", "/w/a,5:alice", strings.Repeat("x", 12), "é", "\xff"}
	seen := map[string][3]string{}
	for _, b := range tricky {
		for _, w := range tricky {
			for _, u := range tricky {
				k := ScopeKey(b, w, u)
				if prev, dup := seen[k]; dup {
					t.Fatalf("ScopeKey collision: %q and %q → %q", prev, [3]string{b, w, u}, k)
				}
				seen[k] = [3]string{b, w, u}
				if !strings.HasPrefix(k, ScopePrefix(b)) {
					t.Fatalf("ScopePrefix(%q) not a prefix of %q", b, k)
				}
				gb, gw, gu, ok := ParseScopeKey(k)
				if !ok || gb != b || gw != w || gu != u {
					t.Fatalf("ParseScopeKey(%q) = %q %q %q %v", k, gb, gw, gu, ok)
				}
				for _, other := range tricky {
					if other != b && strings.HasPrefix(k, ScopePrefix(other)) {
						t.Fatalf("ScopePrefix(%q) is a prefix of %q's key %q", other, b, k)
					}
				}
			}
		}
	}
	if got := ScopeKey("gh@2", "/work/repo", "alice"); got != "4:gh@2,10:/work/repo,5:alice," {
		t.Errorf("ScopeKey = %q", got)
	}
	for _, bad := range []string{"", "4:gh@2,", "4:gh@2,0:,0:,x", "04:gh@2,0:,0:,", "+4:gh@2,0:,0:,", "4:gh@2;0:,0:,", "9:gh@2,0:,0:,"} {
		if _, _, _, ok := ParseScopeKey(bad); ok {
			t.Errorf("ParseScopeKey(%q) accepted", bad)
		}
	}
}

func FuzzScopeKey(f *testing.F) {
	f.Add("gh@2", "/w", "u", "gh@2", "/w", "u,")
	f.Add("1:a,", "", "", "1", "a,", "")
	f.Fuzz(func(t *testing.T, b1, w1, u1, b2, w2, u2 string) {
		k1, k2 := ScopeKey(b1, w1, u1), ScopeKey(b2, w2, u2)
		same := b1 == b2 && w1 == w2 && u1 == u2
		if (k1 == k2) != same {
			t.Fatalf("ScopeKey(%q,%q,%q)=%q vs ScopeKey(%q,%q,%q)=%q", b1, w1, u1, k1, b2, w2, u2, k2)
		}
		if strings.HasPrefix(k2, ScopePrefix(b1)) != (b1 == b2) {
			t.Fatalf("ScopePrefix(%q) vs key of bundle %q", b1, b2)
		}
		if b, w, u, ok := ParseScopeKey(k1); !ok || b != b1 || w != w1 || u != u1 {
			t.Fatalf("round trip of %q failed", k1)
		}
	})
}

func BenchmarkUpdate(b *testing.B) {
	s := openT(b, b.TempDir())
	b.ReportAllocs()
	for b.Loop() {
		_, err := s.Update(BucketSetup, ScopeKey("gh@2", "/work/repo", "alice"), func(cur Record) (any, error) {
			return state{Phase: "done", N: int(cur.Version)}, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	s := openT(b, b.TempDir())
	key := ScopeKey("gh@2", "/work/repo", "alice")
	if _, err := s.Put(BucketSetup, key, state{"done", 1}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var st state
	for b.Loop() {
		if _, _, err := s.Get(BucketSetup, key, &st); err != nil {
			b.Fatal(err)
		}
	}
}
