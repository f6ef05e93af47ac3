// Package tokenstore keeps OAuth tokens at rest: one file per (server URL,
// identity), mode 0600 in a directory of mode 0700, written atomically
// (temporary file, then rename) so that a crash never leaves half a token.
//
// A Record never prints its secrets: String, GoString, Format and LogValue
// all redact them, so a Record that reaches a log line or an error by
// accident shows only what a person may see (issuer, scopes, expiry).
package tokenstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrNotFound is returned by Load when nothing is stored for the key.
var ErrNotFound = errors.New("no stored token")

// ErrCorrupt is wrapped by Load's error when the key's file exists but is
// not a token record for the key. It is not ErrNotFound: the file is there
// and a caller must not take it for "no token" and overwrite it.
var ErrCorrupt = errors.New("not a token record")

// A Key names one stored token. Two identities never share a file, so one
// caller's token is never sent on another's behalf.
type Key struct {
	URL      string // the MCP server's endpoint (the protected resource)
	Identity string // the caller's identity in the pool; empty is its own identity
}

func (k Key) file() string {
	h := sha256.Sum256([]byte(k.URL + "\x00" + k.Identity))
	return hex.EncodeToString(h[:16]) + ".json"
}

// A Record is what a sign-in leaves behind: enough to send the access token
// and to refresh it without the person.
type Record struct {
	URL      string `json:"url"`
	Identity string `json:"identity,omitempty"`

	Issuer        string    `json:"issuer,omitempty"`
	TokenURL      string    `json:"token_url"`
	ClientID      string    `json:"client_id"`
	ClientSecret  string    `json:"client_secret,omitempty"` // from dynamic registration
	AuthStyle     int       `json:"auth_style,omitempty"`    // oauth2.AuthStyle
	Scopes        []string  `json:"scopes,omitempty"`
	AccessToken   string    `json:"access_token"`
	TokenType     string    `json:"token_type,omitempty"`
	RefreshToken  string    `json:"refresh_token,omitempty"`
	Expiry        time.Time `json:"expiry,omitzero"`
	Obtained      time.Time `json:"obtained,omitzero"` // when the access token was issued to us
	RevocationURL string    `json:"revocation_url,omitempty"`
}

const redacted = "[redacted]"

// String describes r without its secrets.
func (r Record) String() string {
	exp := "never"
	if !r.Expiry.IsZero() {
		exp = r.Expiry.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("token for %s (issuer %s, scopes %q, expires %s, access token %s)", r.URL, r.Issuer, strings.Join(r.Scopes, " "), exp, redacted)
}

// GoString is String, so that %#v redacts too.
func (r Record) GoString() string { return r.String() }

// Format makes every verb (%v, %+v, %s, %q) print String.
func (r Record) Format(f fmt.State, _ rune) { fmt.Fprint(f, r.String()) }

// LogValue keeps slog from printing the fields.
func (r Record) LogValue() slog.Value {
	return slog.GroupValue(slog.String("url", r.URL), slog.String("issuer", r.Issuer),
		slog.Any("scopes", r.Scopes), slog.Time("expiry", r.Expiry), slog.String("access_token", redacted))
}

// A Store is a directory of records.
type Store struct {
	Dir string
}

// EnvDir names the token directory in the environment.
const EnvDir = "SWITCHBOARD_TOKEN_DIR"

// DefaultDir is where tokens live unless told otherwise:
// $SWITCHBOARD_TOKEN_DIR, else switchboard/tokens under the user's
// configuration directory (os.UserConfigDir: $XDG_CONFIG_HOME or ~/.config
// on Linux).
func DefaultDir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return d, nil
	}
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("token store: %w", err)
	}
	return filepath.Join(base, "switchboard", "tokens"), nil
}

// Load returns the record stored for k, or an error wrapping ErrNotFound
// when none is. Every other error names the file: one that cannot be read
// (wrapping the *fs.PathError), or one that is not k's record (wrapping
// ErrCorrupt).
func (s *Store) Load(k Key) (*Record, error) {
	path := filepath.Join(s.Dir, k.file())
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w for %s", ErrNotFound, k.URL)
	}
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		// The error of encoding/json may quote the file's bytes: the token.
		return nil, fmt.Errorf("token store: %s is %w", path, ErrCorrupt)
	}
	if r.URL != k.URL || r.Identity != k.Identity {
		return nil, fmt.Errorf("token store: %s belongs to another server or identity: %w", path, ErrCorrupt)
	}
	return &r, nil
}

// Save stores r under its own key, readable by the owner only.
func (s *Store) Save(r *Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	return s.write(Key{URL: r.URL, Identity: r.Identity}.file(), data)
}

// write puts data in the file name of the store, atomically, mode 0600.
func (s *Store) write(name string, data []byte) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	f, err := os.CreateTemp(s.Dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing to remove
	// CreateTemp makes the file 0600 already; Chmod says so in case umask
	// or platform differs.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("token store: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("token store: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.Dir, name)); err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	return nil
}

// Delete removes what is stored for k. Deleting nothing is not an error.
func (s *Store) Delete(k Key) error {
	err := os.Remove(filepath.Join(s.Dir, k.file()))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("token store: %w", err)
	}
	return nil
}

// A Refusal is the last time the server refused the pool's request and the
// pool could get no token that it accepted: what a person needs to know to
// sign in again, or for more. It holds no secret.
type Refusal struct {
	URL      string    `json:"url"`
	Identity string    `json:"identity,omitempty"`
	At       time.Time `json:"at"`
	Status   int       `json:"status"`           // 401 or 403
	Error    string    `json:"error,omitempty"`  // the challenge's error (invalid_token, insufficient_scope)
	Scope    string    `json:"scope,omitempty"`  // the scope the challenge asked for
	Reason   string    `json:"reason,omitempty"` // why no token could be had, in the pool's words
}

func (k Key) refusalFile() string { return strings.TrimSuffix(k.file(), ".json") + ".refused" }

// SaveRefusal records r for its key, replacing the one before.
func (s *Store) SaveRefusal(r *Refusal) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	return s.write(Key{URL: r.URL, Identity: r.Identity}.refusalFile(), data)
}

// LoadRefusal returns the refusal recorded for k, or an error wrapping
// ErrNotFound.
func (s *Store) LoadRefusal(k Key) (*Refusal, error) {
	path := filepath.Join(s.Dir, k.refusalFile())
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no refusal for %s", ErrNotFound, k.URL)
	}
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	var r Refusal
	if err := json.Unmarshal(data, &r); err != nil || r.URL != k.URL || r.Identity != k.Identity {
		return nil, fmt.Errorf("token store: %s is not a refusal of %s", path, k.URL)
	}
	return &r, nil
}

// DeleteRefusal forgets k's refusal, as a token that works does.
func (s *Store) DeleteRefusal(k Key) error {
	err := os.Remove(filepath.Join(s.Dir, k.refusalFile()))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("token store: %w", err)
	}
	return nil
}
