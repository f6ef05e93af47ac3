package builtin

import (
	"reflect"
	"testing"
)

func TestFailed(t *testing.T) {
	for content, want := range map[string]bool{
		`Error: agent "packrat", tool "store_note" reported an error: text is empty`:          true,
		`Error: the call to agent "packrat", tool "store_note" failed: JSON-RPC error -32603`: true,
		`error: boom`:                                     true,
		`packrat.store_note failed: boom`:                 true,
		`{"error":{"message":"boom"}}`:                    true,
		`{"isError":true,"content":[]}`:                   true,
		`Stored note 3.`:                                  false,
		`{"error":null,"result":4}`:                       false,
		"Note 1 (stored ...)\nthe launch failed to start": false,
	} {
		if got := failed(content); got != want {
			t.Errorf("failed(%q) = %v, want %v", content, got, want)
		}
	}
}

func TestFailureMessage(t *testing.T) {
	store := newTool("packrat__store_note", "", &schema{})
	for content, want := range map[string]string{
		`Error: agent "packrat", tool "store_note" reported an error: text is empty: pass the content to archive in "text"`: `packrat.store_note failed: text is empty: pass the content to archive in "text".`,
		`Error: the call to agent "packrat", tool "store_note" failed. The agent could not be reached; nothing ran.`:        `packrat.store_note failed: The agent could not be reached; nothing ran.`,
		`{"error":{"message":"disk full"}}`: `packrat.store_note failed: disk full.`,
		`error`:                             `packrat.store_note failed.`,
	} {
		if got := failure(store, content); got != want {
			t.Errorf("failure(%q)\n got %q\nwant %q", content, got, want)
		}
	}
}

func TestItems(t *testing.T) {
	for _, tc := range []struct {
		content string
		want    []string
		empty   bool
	}{
		{"2 notes matching \"launch\", newest first:\n\nNote 2: Plan (stored 2026-01-02T03:04:05Z; tags: work)\nthe launch moved to Friday\n\nNote 1 (stored 2026-01-01T00:00:00Z)\nlaunch prep\nstarts Monday",
			[]string{"the launch moved to Friday", "launch prep starts Monday"}, false},
		{`No notes matching "launch".`, nil, true},
		{`{"notes":[{"id":1,"text":"a"},{"id":2,"text":"b"}],"count":2}`, []string{"a", "b"}, false},
		{`{"notes":[],"count":0}`, nil, true},
		{`[]`, nil, true},
		{"just one line of text.", []string{"just one line of text"}, false},
	} {
		got, empty := items(tc.content)
		if !reflect.DeepEqual(got, tc.want) || empty != tc.empty {
			t.Errorf("items(%q) = %q, %v; want %q, %v", tc.content, got, empty, tc.want, tc.empty)
		}
	}
}

func TestSummarize(t *testing.T) {
	for content, want := range map[string]string{
		`{"expression":"2+2","result":4,"text":"2+2 = 4"}`: "2+2 = 4",
		`{"result":4}`:        "4",
		"multi\nline   text":  "multi line text",
		`{"unknown":"shape"}`: `{"unknown":"shape"}`,
	} {
		if got := summarize(content); got != want {
			t.Errorf("summarize(%q) = %q, want %q", content, got, want)
		}
	}
}
