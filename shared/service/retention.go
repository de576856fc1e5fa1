package service

import (
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/retention"
)

// RetentionConfig maps the retention section (retention.enabled, retention.outbox.*,
// retention.inbox.*) to the cleaner's Config.
func RetentionConfig(cfg *config.Config) retention.Config {
	r := cfg.Retention
	return retention.Config{Enabled: r.Enabled, Outbox: tableRetention(r.Outbox), Inbox: tableRetention(r.Inbox)}
}

func tableRetention(t config.TableRetention) retention.TableConfig {
	return retention.TableConfig{
		Policy:          retention.Policy(t.Policy),
		MaxAge:          t.MaxAge.Duration(),
		MaxCount:        t.MaxCount,
		CleanupInterval: t.CleanupInterval.Duration(),
		BatchSize:       t.BatchSize,
	}
}
