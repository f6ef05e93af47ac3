// Package idempotency is Switchboard's request idempotency for tools/call
// (docs/IDEMPOTENCY.md): the wire names, the key format, the fingerprint,
// and the key's place in a context. The durable ledger of calls an agent
// has run, and the receiving middleware that answers a repeated key from
// it, are in package ledger below: the pool and delegation, which only send
// keys, import this package and so do not link the ledger's SQLite.
//
// The shape follows MCP's proposal SEP-3182 and Stripe's Idempotency-Key: a
// key names one logical call; the same key with the same request gets the
// original result, marked as a replay, and the tool does not run again; the
// same key with a different request is a conflict. Because go-sdk drops
// unknown fields of tools/call params, the key travels in params._meta.
package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-run/switchboard/internal/rpccode"
)

// Wire names. They are documented in docs/IDEMPOTENCY.md; changing one is a
// protocol change.
const (
	// MetaKey is the tools/call params._meta field carrying the key.
	MetaKey = "run.switchboard/idempotency-key"
	// ReplayMetaKey is set to true in the _meta of a result that was
	// returned from the ledger instead of running the tool.
	ReplayMetaKey = "run.switchboard/replay"
	// CapabilityName is the ServerCapabilities.experimental entry a server
	// advertises; its value is a CapabilityInfo.
	CapabilityName = "run.switchboard/idempotency"
	// Version is the protocol version this package speaks.
	Version = 1
)

// JSON-RPC error codes of the protocol, from the tree's one list
// (internal/rpccode, where each is explained).
const (
	// CodeConflict: the key was used before for a different request (tool,
	// arguments or caller). Nothing ran.
	CodeConflict = rpccode.IdempotencyConflict
	// CodeStillRunning: the first call with this key is still running; ask
	// again later. Nothing new ran. error.data.retryAfterMs says when.
	CodeStillRunning = rpccode.StillRunning
	// CodeInterrupted: the first call with this key was cut off by a crash
	// of the server process while it ran; whether its effect happened is not
	// known. Nothing new ran. This is final for the key.
	CodeInterrupted = rpccode.Interrupted
	// CodeKeyExpired: the key is older than the server keeps records for
	// (retention), so the server can no longer tell whether it ran. Nothing
	// ran.
	CodeKeyExpired = rpccode.KeyExpired
)

// CapabilityInfo is the value of ServerCapabilities.experimental
// [CapabilityName].
type CapabilityInfo struct {
	Version          int   `json:"version"`
	RetentionSeconds int64 `json:"retentionSeconds"`
	MaxRecords       int64 `json:"maxRecords"`
}

// Defaults for retention and waiting.
const (
	DefaultRetention  = 24 * time.Hour
	DefaultMaxRecords = 100_000
	// DefaultWait bounds how long a repeated key waits for its first call,
	// still running in this process, before CodeStillRunning.
	DefaultWait = 5 * time.Second
	// MaxKeyLen bounds a key; longer keys are refused (-32602).
	MaxKeyLen = 200
)

// keyPrefix marks keys whose creation time is readable (NewKey).
const keyPrefix = "sb1."

var b32 = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// NewKey returns a fresh key that embeds its creation time: sb1.<unix
// milliseconds, big-endian, base32hex lower-case>.<128 random bits, base32hex>.
// The embedded time lets a server refuse a key older than its retention
// instead of running it as new.
func NewKey(now time.Time) string {
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(now.UnixMilli()))
	var r [16]byte
	rand.Read(r[:])
	return keyPrefix + b32.EncodeToString(ts[:]) + "." + b32.EncodeToString(r[:])
}

// DerivedKey returns a key for a call that is named by stable parts (a run
// id and a model's tool call id, say), so every resend of it carries the
// same key; created is when the logical call was first made (for
// retention). With a zero created the key has no readable time: it starts
// "sbd." instead of "sb1.".
func DerivedKey(created time.Time, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	if created.IsZero() {
		return "sbd." + b32.EncodeToString(h.Sum(nil)[:20])
	}
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(created.UnixMilli()))
	return keyPrefix + b32.EncodeToString(ts[:]) + "." + b32.EncodeToString(h.Sum(nil)[:16])
}

// KeyTime returns the creation time a key of NewKey's format embeds.
func KeyTime(key string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if !ok {
		return time.Time{}, false
	}
	ts, _, ok := strings.Cut(rest, ".")
	if !ok {
		return time.Time{}, false
	}
	raw, err := b32.DecodeString(ts)
	if err != nil || len(raw) != 8 {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(raw))), true
}

// ErrBadKey is wrapped by CheckKey's errors.
var ErrBadKey = errors.New("malformed idempotency key")

// CheckKey validates a key: 1 to MaxKeyLen characters of [A-Za-z0-9._:-].
func CheckKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d characters, want 1 to %d", ErrBadKey, len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return fmt.Errorf("%w: character %q at %d (allowed: letters, digits, . _ : -)", ErrBadKey, c, i)
		}
	}
	return nil
}

// KeyFromMeta returns the key in a tools/call's _meta. ok is false when
// there is none; a value that is not a string is an error.
func KeyFromMeta(meta map[string]any) (key string, ok bool, err error) {
	v, found := meta[MetaKey]
	if !found {
		return "", false, nil
	}
	s, isString := v.(string)
	if !isString {
		return "", false, fmt.Errorf("%w: _meta[%q] is %T, want a string", ErrBadKey, MetaKey, v)
	}
	if err := CheckKey(s); err != nil {
		return "", false, err
	}
	return s, true, nil
}

// Fingerprint identifies a request for a conflict check: a SHA-256 over the
// tool name, the arguments in canonical JSON (object keys sorted, numbers
// as written, insignificant white space removed) and the caller's
// credential (so one caller's key cannot fetch another caller's result).
func Fingerprint(tool string, args json.RawMessage, credential string) (string, error) {
	canon, err := canonicalJSON(args)
	if err != nil {
		return "", fmt.Errorf("fingerprint of %s: arguments: %w", tool, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "tool %d:%s\nargs %d:%s\ncred %d:%s\n", len(tool), tool, len(canon), canon, len(credential), credential)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// canonicalJSON re-encodes v with sorted object keys; numbers keep their
// text (json.Number), so 1.0 and 1 differ as they do on the wire.
func canonicalJSON(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return []byte("null"), nil
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v) // encoding/json sorts map keys
}

type keyCtx struct{}

// KeyFrom returns the idempotency key of the tools/call being served, if it
// carried one: a tool that calls others derives their keys from it.
func KeyFrom(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(keyCtx{}).(string)
	return k, ok
}

// WithKey returns ctx as the guard makes it for a tools/call with key, for
// in-process callers of tools that delegate.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx{}, key)
}
