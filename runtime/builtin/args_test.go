package builtin

import (
	"errors"
	"testing"
)

func TestFillArgs(t *testing.T) {
	tools := internalTools(t, packratSchemas, abacusSchemas)
	byName := map[string]*tool{}
	for _, tl := range tools {
		byName[tl.name] = tl
	}
	calc := []prior{{content: "12 * 7 = 84"}}
	stored := []prior{{content: "Stored note 9."}}
	found := []prior{{content: "1 note matching \"budget\", newest first:\n\nNote 7 (stored 2026-01-02T03:04:05Z)\nthe Q3 budget is 40k"}}
	for _, tc := range []struct {
		tool, step string
		prior      []prior
		want       string
	}{
		// Text to store: the step without its command.
		{"packrat__store_note", "remember that the launch moved to Friday", nil, `{"text":"the launch moved to Friday"}`},
		{"packrat__store_note", "please make a note that the demo is at noon.", nil, `{"text":"the demo is at noon"}`},
		{"packrat__store_note", "note: buy milk", nil, `{"text":"buy milk"}`},
		{"packrat__store_note", "keep in mind that the office is closed on Monday", nil, `{"text":"the office is closed on Monday"}`},
		{"packrat__store_note", "save this: the wifi password is hunter2", nil, `{"text":"the wifi password is hunter2"}`},
		{"packrat__store_note", "remember that Bob tagged the release", nil, `{"text":"Bob tagged the release"}`},
		{"packrat__store_note", "save a note titled Launch saying the launch moved to Friday, tagged work and launch", nil,
			`{"tags":["work","launch"],"text":"the launch moved to Friday","title":"Launch"}`},
		{"packrat__store_note", `store a note with the title "Q3 budget": the budget is 40k`, nil, `{"text":"the budget is 40k","title":"Q3 budget"}`},

		// Search queries: the subject, stopwords and command words dropped.
		{"packrat__search_notes", "tell me what you know about the launch", nil, `{"query":"launch"}`},
		{"packrat__search_notes", "search notes for launch plans", nil, `{"query":"launch plans"}`},
		{"packrat__search_notes", "what do you remember about Alice and Bob?", nil, `{"query":"Alice Bob"}`},
		{"packrat__search_notes", "look up the Q3 budget", nil, `{"query":"Q3 budget"}`},
		{"packrat__search_notes", "find the top 3 notes about the budget", nil, `{"limit":3,"query":"budget"}`},
		{"packrat__search_notes", "search notes tagged work", nil, `{"query":"work","tag":"work"}`},
		{"packrat__list_notes", "list my 5 latest notes", nil, `{"limit":5}`},
		{"packrat__list_notes", "list my notes", nil, `{}`},

		// Ids: from the step, else from the newest earlier result.
		{"packrat__get_note", "show me note 4", nil, `{"id":4}`},
		{"packrat__get_note", "read #12", nil, `{"id":12}`},
		{"packrat__delete_note", "delete it", stored, `{"id":9}`},
		{"packrat__delete_note", "delete that note", found, `{"id":7}`},

		// Arithmetic.
		{"abacus__calculate", "what is 12*(3+4)?", nil, `{"expression":"12*(3+4)"}`},
		{"abacus__calculate", "calculate 1,250 divided by 5", nil, `{"expression":"1250 / 5"}`},
		{"abacus__calculate", "what is the square root of 144 plus 3", nil, `{"expression":"sqrt(144) + 3"}`},
		{"abacus__calculate", "what is 15% of 80", nil, `{"expression":"15/100*80"}`},
		{"abacus__calculate", "compute max(3, 7) * 2", nil, `{"expression":"max(3, 7) * 2"}`},
		{"abacus__calculate", "what's 3 x 4", nil, `{"expression":"3*4"}`},
		{"abacus__calculate", "multiply that by 2", calc, `{"expression":"84 * 2"}`},
		{"abacus__calculate", "add 5 to it", calc, `{"expression":"84 + 5"}`},
		{"abacus__calculate", "what is 2 to the power of 10", nil, `{"expression":"2 ^ 10"}`},
		{"abacus__calculate", "compute the average of 3, 5 and 10", nil, `{"expression":"(3 + 5 + 10) / 3"}`},
		{"abacus__calculate", "what is the sum of 1, 2, 3", nil, `{"expression":"1 + 2 + 3"}`},
		{"abacus__calculate", "the product of 4 and 5", nil, `{"expression":"4 * 5"}`},

		// Units.
		{"abacus__convert_units", "convert 5 km to miles", nil, `{"from":"km","to":"miles","value":5}`},
		{"abacus__convert_units", "what is 100 °F in °C", nil, `{"from":"°F","to":"°C","value":100}`},
		{"abacus__convert_units", "convert 100 degrees Fahrenheit to Celsius", nil, `{"from":"fahrenheit","to":"celsius","value":100}`},
		{"abacus__convert_units", "how many feet are in 3 miles", nil, `{"from":"miles","to":"feet","value":3}`},
		{"abacus__convert_units", "convert 1,500.5 MB into GiB", nil, `{"from":"MB","to":"GiB","value":1500.5}`},

		// Dates.
		{"abacus__date_math", "how many days between 2025-01-01 and 2025-03-01", nil, `{"date":"2025-01-01","end_date":"2025-03-01","operation":"between"}`},
		{"abacus__date_math", "how many days until 2025-12-25?", nil, `{"date":"today","end_date":"2025-12-25","operation":"between"}`},
		{"abacus__date_math", "what date is 90 days after 2025-01-15?", nil, `{"amount":90,"date":"2025-01-15","operation":"add"}`},
		{"abacus__date_math", "add 2 weeks to 2025-02-20", nil, `{"amount":2,"date":"2025-02-20","operation":"add","unit":"weeks"}`},
		{"abacus__date_math", "what was the date 10 days before 2025-03-01", nil, `{"amount":10,"date":"2025-03-01","operation":"subtract"}`},
		{"abacus__date_math", "what weekday is March 3, 2025?", nil, `{"date":"2025-03-03","operation":"weekday"}`},
		{"abacus__date_math", "what day of the week is 3rd of March 2025", nil, `{"date":"2025-03-03","operation":"weekday"}`},
	} {
		t.Run(tc.tool+"/"+tc.step, func(t *testing.T) {
			args, err := fillArgs(tc.step, byName[tc.tool], tc.prior)
			if err != nil {
				t.Fatal(err)
			}
			if got := encodeArgs(args); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestFillArgsRefusesToGuess(t *testing.T) {
	tools := internalTools(t, packratSchemas)
	del := tools[4]
	if _, err := fillArgs("delete it", del, nil); !errors.Is(err, errNeedsEarlierResult) {
		t.Errorf("delete it, no earlier result: err = %v, want errNeedsEarlierResult", err)
	}
	failedSearch := []prior{{content: "Error: note 5 is locked", failed: true}}
	if _, err := fillArgs("delete it", del, failedSearch); !errors.Is(err, errNeedsEarlierResult) {
		t.Errorf("delete it after a failure: err = %v, want errNeedsEarlierResult", err)
	}
	if _, err := fillArgs("remember that", tools[0], nil); !errors.Is(err, errNoContent) {
		t.Errorf("remember that: err = %v, want errNoContent", err)
	}
}

// A generic schema: every required parameter is filled, by type, and
// nothing the schema does not declare.
func TestFillArgsGenericSchema(t *testing.T) {
	tools := internalTools(t, `[{"name":"ops__deploy","description":"Deploy a service.","parameters":{"type":"object",
		"required":["service","env","replicas","dry_run","force","labels","extra","undeclared"],
		"properties":{
		 "service":{"type":"string","description":"Service name."},
		 "env":{"type":"string","enum":["staging","production"],"description":"Target."},
		 "region":{"type":"string","enum":["eu","us"]},
		 "replicas":{"type":"integer","minimum":1},
		 "dry_run":{"type":"boolean"},
		 "force":{"type":"boolean"},
		 "labels":{"type":"array","items":{"type":"string"}},
		 "extra":{"type":"object"},
		 "comment":{"type":"string"}}}}]`)
	args, err := fillArgs("deploy the api to production with a dry run", tools[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"dry_run":true,"env":"production","extra":{},"force":false,"labels":["the api to production with a dry run"],"replicas":1,"service":"the api to production with a dry run","undeclared":"the api to production with a dry run"}`
	if got := encodeArgs(args); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestExpressionFallsBackToText(t *testing.T) {
	if got := expression("calculate the meaning of life", nil); got != "the meaning of life" {
		t.Errorf("expression = %q", got)
	}
}
