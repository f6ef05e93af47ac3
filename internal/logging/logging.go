// Package logging builds the slog.Logger every command uses: tint for a
// person at a terminal, JSON for machines.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/lmittmann/tint"
)

// New returns a logger writing to w in format "text" (tint; colour only when
// w is a terminal) or "json".
func New(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	switch format {
	case "", "text":
		color := false
		if f, ok := w.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				color = true
			}
		}
		return slog.New(tint.NewHandler(w, &tint.Options{Level: level, TimeFormat: time.TimeOnly, NoColor: !color})), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})), nil
	}
	return nil, fmt.Errorf("unknown log format %q (want text or json)", format)
}
