package lambdafn_test

import (
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/lambdafn"
)

func TestParseSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		want    lambdafn.Settings
		wantErr string
	}{
		{name: "defaults", env: nil, want: lambdafn.Settings{Mode: lambdafn.Drain, Margin: 2 * time.Second}},
		{name: "drain", env: map[string]string{"LAMBDA_MODE": "drain"}, want: lambdafn.Settings{Mode: lambdafn.Drain, Margin: 2 * time.Second}},
		{name: "continuous", env: map[string]string{"LAMBDA_MODE": "continuous"}, want: lambdafn.Settings{Mode: lambdafn.Continuous, Margin: 2 * time.Second}},
		{name: "any letter case and spaces", env: map[string]string{"LAMBDA_MODE": " Continuous "}, want: lambdafn.Settings{Mode: lambdafn.Continuous, Margin: 2 * time.Second}},
		{name: "empty mode is drain", env: map[string]string{"LAMBDA_MODE": ""}, want: lambdafn.Settings{Mode: lambdafn.Drain, Margin: 2 * time.Second}},
		{name: "margin", env: map[string]string{"LAMBDA_MARGIN_MS": "500"}, want: lambdafn.Settings{Mode: lambdafn.Drain, Margin: 500 * time.Millisecond}},
		{name: "largest margin", env: map[string]string{"LAMBDA_MARGIN_MS": "900000"}, want: lambdafn.Settings{Mode: lambdafn.Drain, Margin: 15 * time.Minute}},
		{name: "unknown mode", env: map[string]string{"LAMBDA_MODE": "fast"},
			wantErr: `LAMBDA_MODE is "fast"; it must be drain or continuous`},
		{name: "zero margin", env: map[string]string{"LAMBDA_MARGIN_MS": "0"},
			wantErr: `LAMBDA_MARGIN_MS is "0"; it must be a whole number of milliseconds from 1 to 900000`},
		{name: "negative margin", env: map[string]string{"LAMBDA_MARGIN_MS": "-5"},
			wantErr: `LAMBDA_MARGIN_MS is "-5"; it must be a whole number of milliseconds from 1 to 900000`},
		{name: "margin with a unit", env: map[string]string{"LAMBDA_MARGIN_MS": "2s"},
			wantErr: `LAMBDA_MARGIN_MS is "2s"; it must be a whole number of milliseconds from 1 to 900000`},
		{name: "margin above the longest timeout", env: map[string]string{"LAMBDA_MARGIN_MS": "900001"},
			wantErr: `LAMBDA_MARGIN_MS is "900001"; it must be a whole number of milliseconds from 1 to 900000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := lambdafn.ParseSettings(tt.env)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ParseSettings error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSettings: %v", err)
			}
			if got != tt.want {
				t.Errorf("ParseSettings = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    lambdafn.Mode
		wantErr bool
	}{
		{in: "", want: lambdafn.Drain},
		{in: "drain", want: lambdafn.Drain},
		{in: "DRAIN", want: lambdafn.Drain},
		{in: "continuous", want: lambdafn.Continuous},
		{in: "continous", wantErr: true},
		{in: "poll", wantErr: true},
	}
	for _, tt := range tests {
		got, err := lambdafn.ParseMode(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseMode(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseMode(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
