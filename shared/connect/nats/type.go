package nats

import "github.com/alternayte/queuebox/shared/connect/nats/natsconfig"

// Type is the destination type of every NATS destination, the destination_type label.
const Type = string(natsconfig.Kind)
