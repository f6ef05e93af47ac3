package idempotency_test

import (
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/idempotency"
)

func TestFingerprintCanonical(t *testing.T) {
	a, _ := idempotency.Fingerprint("t", []byte(`{"b":1, "a":[1,2]}`), "Bearer x")
	b, _ := idempotency.Fingerprint("t", []byte(`{"a":[1,2],"b":1}`), "Bearer x")
	c, _ := idempotency.Fingerprint("t", []byte(`{"a":[1,2],"b":1}`), "Bearer y")
	d, _ := idempotency.Fingerprint("u", []byte(`{"a":[1,2],"b":1}`), "Bearer x")
	if a != b || a == c || a == d {
		t.Fatalf("fingerprints %s %s %s %s", a, b, c, d)
	}
	if _, err := idempotency.Fingerprint("t", []byte(`{`), ""); err == nil {
		t.Fatal("malformed arguments fingerprinted")
	}
}

func TestKeyTime(t *testing.T) {
	now := time.UnixMilli(time.Now().UnixMilli())
	k := idempotency.NewKey(now)
	if err := idempotency.CheckKey(k); err != nil {
		t.Fatal(err)
	}
	if got, ok := idempotency.KeyTime(k); !ok || !got.Equal(now) {
		t.Fatalf("KeyTime(%s) = %v %v, want %v", k, got, ok, now)
	}
	if _, ok := idempotency.KeyTime("caller-chosen"); ok {
		t.Fatal("a key without the prefix has a time")
	}
	d1 := idempotency.DerivedKey(now, "run", "call_1")
	if d1 != idempotency.DerivedKey(now, "run", "call_1") || d1 == idempotency.DerivedKey(now, "run", "call_2") || d1 == idempotency.DerivedKey(now, "runc", "all_1") {
		t.Fatal("derived keys are not a function of their parts")
	}
}
