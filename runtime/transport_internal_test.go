package runtime

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sashabaranov/go-openai"
)

func TestNormalizeResponse(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		status         int
	}{
		{name: "OpenAI's shape passes byte for byte",
			in:   `{"id":"x","choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`,
			want: `{"id":"x","choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`},
		{name: "arguments as an object",
			in:   `{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":{ "a" : [1, 2] }}}]}}]}`,
			want: `{"choices":[{"message":{"tool_calls":[{"function":{"arguments":"{\"a\":[1,2]}","name":"f"}}]}}]}`},
		{name: "arguments null",
			in:   `{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":null}}]}}]}`,
			want: `{"choices":[{"message":{"tool_calls":[{"function":{"arguments":"{}","name":"f"}}]}}]}`},
		{name: "an error in a 200, with an HTTP code", in: `{"error":{"code":429,"message":"Rate limited"}}`, want: `{"error":{"code":429,"message":"Rate limited"}}`, status: 429},
		{name: "an error in a 200, with another code", in: `{"error":{"code":"upstream_error","message":"x"}}`, want: `{"error":{"code":"upstream_error","message":"x"}}`, status: http.StatusBadGateway},
		{name: "an error string in a 200", in: `{"error":"model is loading"}`, want: `{"error":"model is loading"}`, status: http.StatusBadGateway},
		{name: "an error beside choices is not one", in: `{"error":null,"choices":[{"message":{"content":"hi"}}]}`, want: `{"error":null,"choices":[{"message":{"content":"hi"}}]}`},
		{name: "not JSON passes", in: `<html>oops</html>`, want: `<html>oops</html>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, status := normalizeResponse([]byte(tc.in))
			if string(out) != tc.want || status != tc.status {
				t.Errorf("normalizeResponse(%s) =\n %s, %d\nwant\n %s, %d", tc.in, out, status, tc.want, tc.status)
			}
		})
	}
}

// TestNormalizeBounded: a body past maxModelResponse is not rewritten, and
// reaches go-openai whole.
func TestNormalizeBounded(t *testing.T) {
	big := `{"choices":[{"message":{"content":"` + strings.Repeat("x", maxModelResponse) + `","tool_calls":[{"function":{"arguments":{}}}]}}]}`
	tr := &modelTransport{base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: readCloser{strings.NewReader(big), http.NoBody}, Request: req}, nil
	})}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/v1/chat/completions", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	got.ReadFrom(resp.Body)
	if got.String() != big {
		t.Errorf("a %d-byte body came out as %d bytes, changed", len(big), got.Len())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// FuzzNormalizeResponse: whatever a server sends, normalizeResponse does
// not panic; what it rewrites is JSON that go-openai decodes, with every
// tool call's arguments a string.
func FuzzNormalizeResponse(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"function":{"arguments":null}},{"function":{"arguments":"{}"}}]}}]}`,
		`{"error":{"code":502,"message":"x"}}`,
		`{"Choices":[{"Message":{"Tool_Calls":[{"Function":{"Arguments":[1]}}]}}]}`,
		`[]`, `null`, `{"choices":null}`, `{"choices":[{"message":null}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, status := normalizeResponse(body)
		if status != 0 && (status < 400 || status > 599) {
			t.Fatalf("status %d is no error status", status)
		}
		if bytes.Equal(out, body) {
			return
		}
		var resp openai.ChatCompletionResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("rewrote %s into %s, which go-openai cannot decode: %v", body, out, err)
		}
	})
}
