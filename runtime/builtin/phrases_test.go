package builtin

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sashabaranov/go-openai"
)

// These tests run whole turns through the OpenAI wire format against the
// real abacus and packrat toolsets (bundled_test.go): the call each
// phrasing makes, and the answer the real tool gives.

// TestToolPhrasings: the questions the tools' own descriptions ask, in
// the forms people write them, each reaching the right tool with the right
// arguments.
func TestToolPhrasings(t *testing.T) {
	for _, tc := range []struct {
		task string
		want []round
	}{
		// date_math: "count the days between two dates".
		{"how many days between March 1, 2026 and March 9, 2026?", []round{
			{calls: []call{{"abacus__date_math", `{"date":"2026-03-01","end_date":"2026-03-09","operation":"between"}`}}},
			{text: "abacus.date_math: From 2026-03-01 to 2026-03-09 is 8 days (1 week and 1 day)."}}},
		{"how many days from 2026-01-01 to 1 March 2026", []round{
			{calls: []call{{"abacus__date_math", `{"date":"2026-01-01","end_date":"2026-03-01","operation":"between"}`}}},
			{text: "abacus.date_math: From 2026-01-01 to 2026-03-01 is 59 days (8 weeks and 3 days)."}}},
		// date_math: "what weekday is ...?".
		{"what weekday is 2026-03-01?", []round{
			{calls: []call{{"abacus__date_math", `{"date":"2026-03-01","operation":"weekday"}`}}},
			{text: "abacus.date_math: 2026-03-01 is a Sunday (ISO week 9, day 60 of the year)."}}},
		{"What day of the week is March 1st, 2026?", []round{
			{calls: []call{{"abacus__date_math", `{"date":"2026-03-01","operation":"weekday"}`}}},
			{text: "abacus.date_math: 2026-03-01 is a Sunday (ISO week 9, day 60 of the year)."}}},
		// An unambiguous numeric date: 13 can only be the day.
		{"what weekday was 13/04/2026", []round{
			{calls: []call{{"abacus__date_math", `{"date":"2026-04-13","operation":"weekday"}`}}},
			{text: "abacus.date_math: 2026-04-13 is a Monday (ISO week 16, day 103 of the year)."}}},
		// date_math: "what date is 90 days after 2025-01-15?".
		{"what date is 90 days after 2025-01-15?", []round{
			{calls: []call{{"abacus__date_math", `{"amount":90,"date":"2025-01-15","operation":"add","unit":"days"}`}}},
			{text: "abacus.date_math: 2025-01-15 + 90 days = 2025-04-15 (Tuesday)"}}},
		// "it" is the date the step before computed.
		{"what date is 90 days after 2025-01-15, then what weekday is it", []round{
			{calls: []call{{"abacus__date_math", `{"amount":90,"date":"2025-01-15","operation":"add","unit":"days"}`}}},
			{calls: []call{{"abacus__date_math", `{"date":"2025-04-15","operation":"weekday"}`}}},
			{text: "abacus.date_math: 2025-01-15 + 90 days = 2025-04-15 (Tuesday)\nabacus.date_math: 2025-04-15 is a Tuesday (ISO week 16, day 105 of the year)."}}},
		{"subtract 2 weeks from Jan 31, 2026", []round{
			{calls: []call{{"abacus__date_math", `{"amount":2,"date":"2026-01-31","operation":"subtract","unit":"weeks"}`}}},
			{text: "abacus.date_math: 2026-01-31 - 2 weeks = 2026-01-17 (Saturday)"}}},
		// convert_units, in the tool's units and in full names.
		{"how many grams in 3.5 pounds?", []round{
			{calls: []call{{"abacus__convert_units", `{"from":"pounds","to":"grams","value":3.5}`}}},
			{text: "abacus.convert_units: 3.5 lb = 1587.573295 g"}}},
		{"how many feet are in a mile", []round{
			{calls: []call{{"abacus__convert_units", `{"from":"mile","to":"feet","value":1}`}}},
			{text: "abacus.convert_units: 1 mi = 5280 ft"}}},
		{"what is 100 °F in °C", []round{
			{calls: []call{{"abacus__convert_units", `{"from":"°F","to":"°C","value":100}`}}},
			{text: "abacus.convert_units: 100 °F = 37.7777777777778 °C"}}},
		// The case of a unit is kept: Mb is a megabit, MB a megabyte.
		{"convert 8 Mb to MB", []round{
			{calls: []call{{"abacus__convert_units", `{"from":"Mb","to":"MB","value":8}`}}},
			{text: "abacus.convert_units: 8 Mbit = 1 MB"}}},
		{"convert 3 fl oz to ml", []round{
			{calls: []call{{"abacus__convert_units", `{"from":"fl oz","to":"ml","value":3}`}}},
			{text: "abacus.convert_units: 3 fl oz = 88.7205886875 mL"}}},
		// calculate: percentages and the operators in words.
		{"what is 17% of 2340?", []round{
			{calls: []call{{"abacus__calculate", `{"expression":"17/100*2340"}`}}},
			{text: "abacus.calculate: 17/100*2340 = 397.8"}}},
		{"what percent of 200 is 50", []round{
			{calls: []call{{"abacus__calculate", `{"expression":"50 / 200 * 100"}`}}},
			{text: "abacus.calculate: 50 / 200 * 100 = 25"}}},
		{"what is 12 plus 30", []round{
			{calls: []call{{"abacus__calculate", `{"expression":"12 + 30"}`}}},
			{text: "abacus.calculate: 12 + 30 = 42"}}},
		{"what is 6 times 7 divided by 2", []round{
			{calls: []call{{"abacus__calculate", `{"expression":"6 * 7 / 2"}`}}},
			{text: "abacus.calculate: 6 * 7 / 2 = 21"}}},
		{"what's the square root of 16", []round{
			{calls: []call{{"abacus__calculate", `{"expression":"sqrt(16)"}`}}},
			{text: "abacus.calculate: sqrt(16) = 4"}}},
		{"how many miles is 5 km", []round{
			{calls: []call{{"abacus__convert_units", `{"from":"km","to":"miles","value":5}`}}},
			{text: "abacus.convert_units: 5 km = 3.10685596118667 mi"}}},
		{"2026-01-31 plus 1 month", []round{
			{calls: []call{{"abacus__date_math", `{"amount":1,"date":"2026-01-31","operation":"add","unit":"months"}`}}},
			{text: "abacus.date_math: 2026-01-31 + 1 months = 2026-02-28 (Saturday)"}}},
		{"45 is what percent of 180", []round{
			{calls: []call{{"abacus__calculate", `{"expression":"45 / 180 * 100"}`}}},
			{text: "abacus.calculate: 45 / 180 * 100 = 25"}}},
		{"what is the difference between 100 and 58", []round{
			{calls: []call{{"abacus__calculate", `{"expression":"100 - 58"}`}}},
			{text: "abacus.calculate: 100 - 58 = 42"}}},
		{"round 3.14159 to 2 decimal places", []round{
			{calls: []call{{"abacus__calculate", `{"expression":"round(3.14159, 2)"}`}}},
			{text: "abacus.calculate: round(3.14159, 2) = 3.14"}}},
		{"what is 12 squared", []round{
			{calls: []call{{"abacus__calculate", `{"expression":"12 ^ 2"}`}}},
			{text: "abacus.calculate: 12 ^ 2 = 144"}}},
		{"work out the average of 2, 4 and 9", []round{
			{calls: []call{{"abacus__calculate", `{"expression":"(2 + 4 + 9) / 3"}`}}},
			{text: "abacus.calculate: (2 + 4 + 9) / 3 = 5"}}},
	} {
		t.Run(tc.task, func(t *testing.T) {
			agents := newBundledAgents(t)
			got := runTurn(t, newClient(t), tc.task, agents.tools, agents.run)
			if !reflect.DeepEqual(tc.want, got) {
				t.Errorf("turn:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestReadDate: the written dates converted to the form the date tool
// reads, and those refused because their meaning is not certain.
func TestReadDate(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"2026-03-01", "2026-03-01"}, {"2026-3-1", "2026-03-01"}, {"2026/03/01", "2026-03-01"},
		{"March 1, 2026", "2026-03-01"}, {"Mar 1 2026", "2026-03-01"}, {"march 1st, 2026", "2026-03-01"},
		{"1 March 2026", "2026-03-01"}, {"the 1st of March 2026", "2026-03-01"}, {"Sept 30, 2026", "2026-09-30"},
		{"13/04/2026", "2026-04-13"}, {"04/13/2026", "2026-04-13"}, {"04/04/2026", "2026-04-04"},
		{"February 29, 2028", "2028-02-29"}, {"today", "today"}, {"Today", "today"},
	} {
		if got, err := readDate(tc.in, ""); err != nil || got != tc.want {
			t.Errorf("readDate(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"03/04/2026", "12.11.2026", "March 1", "1 March", "February 29, 2026", "2026-13-01",
		"2026-02-30", "next Friday", "Friday", "tomorrow", "Smarch 1, 2026", "13/13/2026", ""} {
		if got, err := readDate(in, ""); !errors.Is(err, errUnmapped) {
			t.Errorf("readDate(%q) = %q, %v; want it refused", in, got, err)
		}
	}
	// "it" is the previous step's date, as the date tool wrote it.
	if got, err := readDate("it", "2025-04-15 (Tuesday)"); err != nil || got != "2025-04-15" {
		t.Errorf("readDate(it) = %q, %v; want 2025-04-15", got, err)
	}
}

// TestTwoPartTask: "A and B" where each side is a whole step of its own is
// two steps, both done: the tester's task that used to be stored whole as
// one note.
func TestTwoPartTask(t *testing.T) {
	agents := newBundledAgents(t)
	got := runTurn(t, newClient(t), "remember that the launch moved to Friday and work out 17% of 2340", agents.tools, agents.run)
	want := []round{
		{calls: []call{{"packrat__store_note", `{"text":"the launch moved to Friday"}`}}},
		{calls: []call{{"abacus__calculate", `{"expression":"17/100*2340"}`}}},
		{text: "packrat.store_note: Stored note 1.\nabacus.calculate: 17/100*2340 = 397.8"},
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("turn:\n got %+v\nwant %+v", got, want)
	}
	if notes := agents.notes(); !reflect.DeepEqual(notes, []string{"the launch moved to Friday"}) {
		t.Errorf("packrat holds %q, want just the launch note", notes)
	}
}

// TestAndInsideAStep: an "and" that does not begin a step of its own is
// part of the text around it, whether a note's, an arithmetic word form's
// or a date question's.
func TestAndInsideAStep(t *testing.T) {
	for _, tc := range []struct {
		task  string
		want  []round
		notes []string
	}{
		{"remember that Alice and Bob met", []round{
			{calls: []call{{"packrat__store_note", `{"text":"Alice and Bob met"}`}}},
			{text: "packrat.store_note: Stored note 1."}}, []string{"Alice and Bob met"}},
		// A bare number after "and" does not begin a step.
		{"remember the numbers 3 and 4", []round{
			{calls: []call{{"packrat__store_note", `{"text":"the numbers 3 and 4"}`}}},
			{text: "packrat.store_note: Stored note 1."}}, []string{"the numbers 3 and 4"}},
		// Words a description merely uses ("pass", "text") are not verbs.
		{"remember that we pass the test and text Bob", []round{
			{calls: []call{{"packrat__store_note", `{"text":"we pass the test and text Bob"}`}}},
			{text: "packrat.store_note: Stored note 1."}}, []string{"we pass the test and text Bob"}},
		// Quoted, an "and calculate" is the note's text.
		{`store_note text="buy milk and calculate the budget"`, []round{
			{calls: []call{{"packrat__store_note", `{"text":"buy milk and calculate the budget"}`}}},
			{text: "packrat.store_note: Stored note 1."}}, []string{"buy milk and calculate the budget"}},
		{"add 2 and 3", []round{
			{calls: []call{{"abacus__calculate", `{"expression":"2 + 3"}`}}},
			{text: "abacus.calculate: 2 + 3 = 5"}}, nil},
		// "note that" is "remember that", though "note" alone names
		// several tools.
		{"note that the budget is 17% of 2340 and rising", []round{
			{calls: []call{{"packrat__store_note", `{"text":"the budget is 17% of 2340 and rising"}`}}},
			{text: "packrat.store_note: Stored note 1."}}, []string{"the budget is 17% of 2340 and rising"}},
		{"how many days between 2026-03-01 and today", []round{
			{calls: []call{{"abacus__date_math", `{"date":"2026-03-01","end_date":"today","operation":"between"}`}}}}, nil},
		// Each "and" that begins a step splits, and "the result" is the
		// step before's.
		{"add 2 and 3 and remember the result", []round{
			{calls: []call{{"abacus__calculate", `{"expression":"2 + 3"}`}}},
			{calls: []call{{"packrat__store_note", `{"text":"5"}`}}},
			{text: "abacus.calculate: 2 + 3 = 5\npackrat.store_note: Stored note 1."}}, []string{"5"}},
	} {
		t.Run(tc.task, func(t *testing.T) {
			agents := newBundledAgents(t)
			got := runTurn(t, newClient(t), tc.task, agents.tools, agents.run)
			if len(tc.want) == 1 {
				// "today" moves: only the call is pinned, not the answer.
				got = got[:1]
			}
			if !reflect.DeepEqual(tc.want, got) {
				t.Errorf("turn:\n got %+v\nwant %+v", got, tc.want)
			}
			if notes := agents.notes(); !reflect.DeepEqual(notes, tc.notes) {
				t.Errorf("packrat holds %q, want %q", notes, tc.notes)
			}
		})
	}
}

// TestUncertainPartRefused: a task with a part the grammar cannot read
// with certainty is refused, naming the part and why, as the chat API's
// refusal; no tool is called, so packrat stores nothing.
func TestUncertainPartRefused(t *testing.T) {
	const nothing = "I did none of the task, so that no part of it is done without the rest: "
	for _, tc := range []struct{ task, want string }{
		{"remember that the launch moved to Friday and work out 17% of",
			`I can't tell what to do with "work out 17% of": cannot read "17% of" as arithmetic: "of" is not a number, a constant or a function call.` + "\n" +
				nothing + `"remember that the launch moved to Friday" is not done either.`},
		{"remember that the launch moved to Friday and calculate the budget",
			`I can't tell what to do with "calculate the budget": cannot read "the budget" as arithmetic: "the" is not a number, a constant or a function call.` + "\n" +
				nothing + `"remember that the launch moved to Friday" is not done either.`},
		// An ambiguous date is named, not guessed.
		{"remember that the launch moved and what weekday is 03/04/2026",
			`I can't tell what to do with "what weekday is 03/04/2026": "03/04/2026" is ambiguous: it is March 4, 2026 read month first and April 3, 2026 read day first; write it as YYYY-MM-DD.` + "\n" +
				nothing + `"remember that the launch moved" is not done either.`},
		{"how many days between March 1 and March 9",
			`I can't tell what to do with "how many days between March 1 and March 9": "March 1" has no year: write it as March 1, YYYY.`},
		{"what weekday is February 30, 2026",
			`I can't tell what to do with "what weekday is February 30, 2026": "February 30, 2026" is not a date: there is no day 30 in month 2 of 2026.`},
		{"what date is 1.5 months after 2026-01-31",
			`I can't tell what to do with "what date is 1.5 months after 2026-01-31": "1.5" is not a whole number of days, weeks, months or years.`},
		{"what weekday is next Friday",
			`I can't tell what to do with "what weekday is next Friday": "next Friday" is not a date I can read: write it as YYYY-MM-DD, as March 1, 2026, or today.`},
		{"remember that " + strings.Repeat("a and ", 33) + "b",
			`I can't tell what to do with "remember that ` + strings.Repeat("a and ", 33) + `b": it has more than 32 "and"s; separate its steps with "then" or ";".`},
		{strings.Repeat("remember x; ", 1500),
			"I did not do the task: it is 17999 bytes long, and the builtin model reads tasks of at most 16384 bytes; split it into several, or use a language model (OPENAI_BASE_URL)."},
		// The part refused is the one without a result before it; the
		// same words later are readable and named as not done.
		{"remember the result; remember the result",
			`I can't tell what to do with "remember the result": "the result" refers to an earlier result, and there is none.` + "\n" +
				nothing + `"remember the result" is not done either.`},
		// Two parts unreadable: both named.
		{"remember that the demo is at noon, then fly me to the moon; calculate 2 +",
			`I can't tell what to do with "fly me to the moon": no offered tool has "fly" in its name or offers it as a verb in its description.` + "\n" +
				`I can't tell what to do with "calculate 2 +": cannot read "2 +" as arithmetic: it is incomplete: it ends with "+".` + "\n" +
				nothing + `"remember that the demo is at noon" is not done either.`},
	} {
		t.Run(tc.task, func(t *testing.T) {
			agents := newBundledAgents(t)
			resp, err := newClient(t).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
				Messages: []openai.ChatCompletionMessage{{Role: "user", Content: tc.task}},
				Tools:    agents.tools,
			})
			if err != nil {
				t.Fatal(err)
			}
			m := resp.Choices[0].Message
			if len(m.ToolCalls) != 0 || m.Content != tc.want || m.Refusal != tc.want {
				t.Errorf("got calls %v, content %q, refusal %q\nwant the refusal %q", m.ToolCalls, m.Content, m.Refusal, tc.want)
			}
			if notes := agents.notes(); len(notes) != 0 {
				t.Errorf("packrat holds %q, want nothing", notes)
			}
		})
	}
}

// TestLateRefusalIsReported: a step read up front with a stand-in for the
// previous result can still be unreadable with the real one; it is then
// refused in the answer, beside the step that was done.
func TestLateRefusalIsReported(t *testing.T) {
	agents := newBundledAgents(t)
	got := runTurn(t, newClient(t), "what is 2+2, then what weekday is it", agents.tools, agents.run)
	want := []round{
		{calls: []call{{"abacus__calculate", `{"expression":"2+2"}`}}},
		{text: "abacus.calculate: 2+2 = 4\n" +
			`I can't tell what to do with "what weekday is it": "it" is not a date I can read: write it as YYYY-MM-DD, as March 1, 2026, or today.`},
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("turn:\n got %+v\nwant %+v", got, want)
	}
}
