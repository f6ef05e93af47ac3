package runtime

import (
	"strings"
	"testing"
)

// TestAnswerFeedMatchesSplitThink: whatever the chunks a content arrives
// in (every split into two and three pieces, so every tag cut at every
// byte), the text the feed sends after its last discard is exactly the
// answer splitThink makes of the whole (the whitespace at its ends
// aside), and never a byte of thought.
func TestAnswerFeedMatchesSplitThink(t *testing.T) {
	contents := []string{
		"Noted: bring cake.",
		"<think>\nthe user wants cake\n</think>\n\nNoted: bring cake.",
		"Before <think>mid thought</think> after.",
		"the template opened it</think>\nNoted.",
		"<think>cut while thinking",
		"a < b and <thin not a tag",
		"  padded answer \n\n",
		"first<think>one</think> and <think>two</think>last",
	}
	for _, content := range contents {
		// The feed holds back the whitespace at the ends, which splitThink
		// keeps when there is no tag; what the person sees is trimmed.
		want, thought := splitThink(content)
		want = strings.TrimSpace(want)
		check := func(chunks []string) {
			t.Helper()
			var got strings.Builder
			f := answerFeed{step: 1, memo: &streamMemo{}, emit: func(d AnswerDelta) {
				if d.Discard {
					got.Reset()
					return
				}
				got.WriteString(d.Text)
			}}
			for _, c := range chunks {
				f.text(c)
			}
			f.end()
			if got.String() != want {
				t.Errorf("content %q in chunks %q: sent %q, want %q", content, chunks, got.String(), want)
			}
			if thought != "" && strings.Contains(got.String(), thought) {
				t.Errorf("content %q in chunks %q: sent the thought %q", content, chunks, thought)
			}
		}
		check([]string{content})
		for i := 1; i < len(content); i++ {
			check([]string{content[:i], content[i:]})
			for j := i + 1; j < len(content); j++ {
				check([]string{content[:i], content[i:j], content[j:]})
			}
		}
	}
}

// TestAnswerFeedHoldsAfterABareClose: once a model's content has begun
// with thinking closed by a bare </think>, the agent's later answers are
// held back until their </think>, so the thought is never sent at all.
func TestAnswerFeedHoldsAfterABareClose(t *testing.T) {
	memo := &streamMemo{}
	var sent []AnswerDelta
	emit := func(d AnswerDelta) { sent = append(sent, d) }
	first := answerFeed{step: 1, memo: memo, emit: emit}
	first.text("thinking aloud")
	first.text("</think>The answer.")
	first.end()
	if !memo.openThinks.Load() {
		t.Fatal("a bare </think> was not remembered")
	}
	sent = nil
	second := answerFeed{step: 2, memo: memo, emit: emit, hold: memo.openThinks.Load()}
	second.text("more ")
	second.text("thought</thi")
	second.text("nk>\nSecond answer.")
	second.end()
	if len(sent) != 1 || sent[0].Discard || sent[0].Text != "Second answer." {
		t.Errorf("second step sent %+v, want only \"Second answer.\"", sent)
	}
}
