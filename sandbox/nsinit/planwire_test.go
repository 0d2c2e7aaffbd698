package nsinit

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/isolation"
)

// fillEvery sets every field of the value v points to, recursively, to a value of its own: the
// n-th scalar met gets n (a string "s<n>", a bool true), a slice gets two elements. A field the
// wire format forgets then shows in the round trip.
func fillEvery(v reflect.Value, n *int) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fillEvery(v.Field(i), n)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fillEvery(s.Index(i), n)
		}
		v.Set(s)
	case reflect.String:
		*n++
		v.SetString("s" + strings.Repeat("x", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		*n++
		v.SetInt(int64(*n) * -1_000_003) // negative and wide: varints of every size
	case reflect.Uint64:
		*n++
		v.SetUint(uint64(*n) << 40)
	default:
		panic("fillEvery: add kind " + v.Kind().String())
	}
}

// TestPlanWireCarriesEveryField: every field of an envelope, its plan and its limits comes through
// the wire format (a field added to them and not to planwire.go fails here), nil lists stay nil
// and empty ones empty, and the encoding of a decoded plan is the same bytes.
func TestPlanWireCarriesEveryField(t *testing.T) {
	var full envelope
	n := 0
	fillEvery(reflect.ValueOf(&full).Elem(), &n)
	full.Protocol = planProtocol
	sparse := envelope{Protocol: planProtocol, Plan: testPlanWithEmpties()}
	for name, want := range map[string]envelope{"every field set": full, "nil and empty lists": sparse} {
		data := encodeEnvelope(want)
		got, err := decodeEnvelope(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the round trip changed the envelope:\n got %+v\nwant %+v", name, got, want)
		}
		if again := encodeEnvelope(got); !bytes.Equal(again, data) {
			t.Errorf("%s: encoding the decoded envelope gives other bytes", name)
		}
	}
}

// testPlanWithEmpties has nil lists and empty ones, which the plan tells apart (a nil Env is an
// empty environment, as an empty one is; JSON kept the difference too).
func testPlanWithEmpties() (p isolation.Plan) {
	p.Path, p.Args, p.Env, p.Deny = "/bin/true", []string{"true"}, []string{}, nil
	p.Groups, p.Ingress = []int{}, nil
	p.Timeout = 90 * time.Second
	return p
}

// TestPlanWireRefusesWhatItDidNotWrite: a plan cut short anywhere, one with bytes after its end,
// one whose lengths overrun it, one of another protocol and one in the JSON of older builds are
// refused with an error that says so, without a panic or an allocation the length asked for.
func TestPlanWireRefusesWhatItDidNotWrite(t *testing.T) {
	var full envelope
	n := 0
	fillEvery(reflect.ValueOf(&full).Elem(), &n)
	full.Protocol = planProtocol
	data := encodeEnvelope(full)
	for i := range len(data) {
		if _, err := decodeEnvelope(data[:i]); !errors.Is(err, errPlanWire) {
			t.Fatalf("the plan cut at byte %d of %d: %v, want a malformed plan", i, len(data), err)
		}
	}
	if _, err := decodeEnvelope(append(bytes.Clone(data), 0)); !errors.Is(err, errPlanWire) {
		t.Errorf("a byte after the plan's end: %v", err)
	}
	// Protocol, then a path whose length says 2^62 bytes.
	huge := append(encodeEnvelope(envelope{Protocol: planProtocol})[:1], 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40)
	if _, err := decodeEnvelope(huge); !errors.Is(err, errPlanWire) {
		t.Errorf("a length past the plan's end: %v", err)
	}
	other := encodeEnvelope(envelope{Protocol: planProtocol + 1})
	if _, err := decodeEnvelope(other); err == nil || !strings.Contains(err.Error(), "install clihost-sandbox from the same build") {
		t.Errorf("a plan of another protocol: %v", err)
	}
	old, _ := json.Marshal(envelope{Protocol: 6})
	if _, err := decodeEnvelope(old); err == nil || !strings.Contains(err.Error(), "JSON") || !strings.Contains(err.Error(), "same build") {
		t.Errorf("a JSON plan of an older build: %v", err)
	}
}

// FuzzDecodeEnvelope: no input makes the decoder panic, and what it accepts survives a round trip
// unchanged (nothing it read was misplaced; varints may have been written longer than needed).
func FuzzDecodeEnvelope(f *testing.F) {
	var full envelope
	n := 0
	fillEvery(reflect.ValueOf(&full).Elem(), &n)
	full.Protocol = planProtocol
	f.Add(encodeEnvelope(full))
	f.Add(encodeEnvelope(envelope{Protocol: planProtocol, Plan: testPlanWithEmpties()}))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := decodeEnvelope(data)
		if err != nil {
			return
		}
		again, err := decodeEnvelope(encodeEnvelope(e))
		if err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("accepted %x as %+v; its round trip gives %+v, %v", data, e, again, err)
		}
	})
}
