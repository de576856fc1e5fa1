//go:build queuebox_no_nats

package connectors

import "github.com/alternayte/queuebox/shared/service"

// natsConnectors returns no connector: the build tag queuebox_no_nats left the NATS connector and
// its client out of this build.
func natsConnectors() []service.Connector { return nil }
