//go:build queuebox_no_nats

package destinations

import "github.com/alternayte/queuebox/shared/service"

// natsBrokers returns no destination: the build tag queuebox_no_nats left the NATS destination
// and its client out of this build.
func natsBrokers() []service.Broker { return nil }
