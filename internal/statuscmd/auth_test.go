package statuscmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/tokenstore"
)

func TestStatusAuth(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SWITCHBOARD_TOKEN_DIR", filepath.Join(dir, "tokens"))
	cfg := filepath.Join(dir, "mcp.json")
	os.WriteFile(cfg, []byte(`{"servers":{"linear":{"url":"https://mcp.linear.example/mcp"},"notes":{"url":"https://notes.example/mcp"},"local":{"command":"true"}}}`), 0o644)
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	store := &tokenstore.Store{Dir: filepath.Join(dir, "tokens")}
	if err := store.Save(&tokenstore.Record{URL: "https://mcp.linear.example/mcp", Issuer: "https://auth.linear.example", Scopes: []string{"read"}, AccessToken: "AT-SECRET", RefreshToken: "RT-SECRET", Expiry: exp}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--auth", "--config", cfg}, {"--auth", "--json", "--config", cfg}} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), args, nil, &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr.String())
		}
		out := stdout.String()
		if strings.Contains(out, "SECRET") || !strings.Contains(out, "linear") || !strings.Contains(out, "notes") || strings.Contains(out, "local") || !strings.Contains(out, "2030-01-02T03:04:05Z") {
			t.Fatalf("%q: output %s", args, out)
		}
	}
}
