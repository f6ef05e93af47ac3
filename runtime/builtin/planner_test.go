package builtin

import (
	"fmt"
	"reflect"
	"testing"
)

// planned is a step as the tests spell it: its text, the tool it calls ("-"
// for none) and its batch (steps of one batch are called together).
type planned struct {
	text  string
	tool  string
	batch int
}

func TestPlan(t *testing.T) {
	tools := internalTools(t, packratSchemas, abacusSchemas)
	for _, tc := range []struct {
		task string
		want []planned
	}{
		{readmeTask, []planned{
			{"remember that the launch moved to Friday", "packrat__store_note", 0},
			{"tell me what you know about the launch", "packrat__search_notes", 1},
		}},
		{"remember that the launch moved to Friday, and tell me what you know about the launch", []planned{
			{"remember that the launch moved to Friday", "packrat__store_note", 0},
			{"tell me what you know about the launch", "packrat__search_notes", 1},
		}},
		{"Remember that Alice and Bob lead the launch.", []planned{
			{"Remember that Alice and Bob lead the launch.", "packrat__store_note", 0},
		}},
		{"remember to call Alice and tell her the plan", []planned{
			{"remember to call Alice and tell her the plan", "packrat__store_note", 0},
		}},
		{"remember that if it rains then we postpone the picnic", []planned{
			{"remember that if it rains then we postpone the picnic", "packrat__store_note", 0},
		}},
		{"calculate 2+2 and convert 5 km to miles", []planned{
			{"calculate 2+2", "abacus__calculate", 0},
			{"convert 5 km to miles", "abacus__convert_units", 0},
		}},
		{"calculate 2+2 and then convert 5 km to miles", []planned{
			{"calculate 2+2", "abacus__calculate", 0},
			{"convert 5 km to miles", "abacus__convert_units", 1},
		}},
		{"find notes about the launch and calculate 3*3", []planned{
			{"find notes about the launch", "packrat__search_notes", 0},
			{"calculate 3*3", "abacus__calculate", 0},
		}},
		{"search notes for launch plans and delete note 3", []planned{
			{"search notes for launch plans", "packrat__search_notes", 0},
			{"delete note 3", "packrat__delete_note", 1}, // same agent, one writes
		}},
		{"convert 5 km to miles and multiply that by 2", []planned{
			{"convert 5 km to miles", "abacus__convert_units", 0},
			{"multiply that by 2", "abacus__calculate", 1}, // refers back
		}},
		{"what is 12 times 7, then multiply that by 2", []planned{
			{"what is 12 times 7", "abacus__calculate", 0},
			{"multiply that by 2", "abacus__calculate", 1},
		}},
		{"What's 2^10? Then remember that 2^10 is 1024.", []planned{
			{"What's 2^10", "abacus__calculate", 0},
			{"remember that 2^10 is 1024.", "packrat__store_note", 1},
		}},
		{"please remember: buy milk; then list my recent notes", []planned{
			{"please remember: buy milk", "packrat__store_note", 0},
			{"list my recent notes", "packrat__list_notes", 1},
		}},
		{"how many days between 2025-01-01 and 2025-03-01", []planned{
			{"how many days between 2025-01-01 and 2025-03-01", "abacus__date_math", 0},
		}},
		{"what is 5 km in miles", []planned{{"what is 5 km in miles", "abacus__convert_units", 0}}},
		{"what weekday is March 3, 2025?", []planned{{"what weekday is March 3, 2025?", "abacus__date_math", 0}}},
		{"show me note 4", []planned{{"show me note 4", "packrat__get_note", 0}}},
		{"Hello! What's the capital of France?", []planned{
			{"Hello", "-", -1},
			{"What's the capital of France?", "-", -1},
		}},
	} {
		t.Run(tc.task, func(t *testing.T) {
			var got []planned
			for _, s := range plan(tc.task, tools, true) {
				name := "-"
				if s.tool != nil {
					name = s.tool.name
				}
				got = append(got, planned{s.text, name, s.batch})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestPlanSequentialWhenParallelOff(t *testing.T) {
	tools := internalTools(t, abacusSchemas)
	steps := plan("calculate 2+2 and convert 5 km to miles", tools, false)
	if len(steps) != 2 || steps[0].batch == steps[1].batch {
		t.Errorf("steps %+v: want two batches", steps)
	}
}

func TestStem(t *testing.T) {
	for _, group := range [][]string{
		{"store", "stored", "stores", "storing"},
		{"note", "notes", "noted"},
		{"calculate", "calculated", "calculating", "calculates"},
		{"search", "searches", "searching", "searched"},
		{"day", "days"},
		{"date", "dates"},
	} {
		for _, w := range group[1:] {
			if stem(w) != stem(group[0]) {
				t.Errorf("stem(%q) = %q, stem(%q) = %q: want equal", w, stem(w), group[0], stem(group[0]))
			}
		}
	}
}

func TestSplitName(t *testing.T) {
	for in, want := range map[string]string{
		"store_note":      "[store note]",
		"storeNote":       "[store note]",
		"convert-units":   "[convert units]",
		"idempotency_key": "[idempotency key]",
		"getHTTPStatus":   "[get httpstatus]",
	} {
		if got := fmt.Sprint(splitName(in)); got != want {
			t.Errorf("splitName(%q) = %s, want %s", in, got, want)
		}
	}
}
