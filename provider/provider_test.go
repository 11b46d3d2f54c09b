package provider_test

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/provider"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   error
	}{
		{401, "", provider.ErrAuth},
		{403, "", provider.ErrAuth},
		{429, "", provider.ErrRateLimited},
		{500, "", provider.ErrUnavailable},
		{503, "", provider.ErrUnavailable},
		{400, `{"error": {"code": "context_length_exceeded"}}`, provider.ErrContextTooLong},
		{400, `prompt is too long: 210000 tokens > 200000 maximum`, provider.ErrContextTooLong},
		{400, `bad tool schema`, nil},
		{404, "", nil},
	} {
		if got := provider.Classify(tc.status, tc.body); !errors.Is(got, tc.want) || (tc.want == nil && got != nil) {
			t.Errorf("Classify(%d, %q) = %v, want %v", tc.status, tc.body, got, tc.want)
		}
	}
	err := &provider.StatusError{Status: 429, Message: "slow down", Err: provider.ErrRateLimited}
	if !errors.Is(err, provider.ErrRateLimited) || err.Error() != "model endpoint answered HTTP 429: slow down" {
		t.Errorf("StatusError = %v", err)
	}
	err = &provider.StatusError{Status: 502, Message: "Bad Gateway", Body: provider.ClipBody("<html>\n  <b>nginx</b>" + strings.Repeat("é", 400)), Err: provider.ErrUnavailable}
	if got := err.Error(); !strings.HasPrefix(got, "model endpoint answered HTTP 502: Bad Gateway (<html> <b>nginx</b>éé") || !strings.Contains(got, "é…); an error of its server, which was reached: not a connection failure") || len(got) > 420 {
		t.Errorf("StatusError = %v", got)
	}
}
