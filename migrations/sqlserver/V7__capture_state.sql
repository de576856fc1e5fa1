-- QueueBox V7: the state of change data capture, one row per capture identity.
-- Batches end at lines that read exactly GO, as sqlcmd splits them. Run with sqlcmd -b -I.
SET ANSI_NULLS ON;
SET QUOTED_IDENTIFIER ON;
GO

IF OBJECT_ID(N'queuebox_capture_state', N'U') IS NULL
    CREATE TABLE queuebox_capture_state (
        identity_name       VARCHAR(63) NOT NULL PRIMARY KEY,
        state_id            VARCHAR(36) NOT NULL,
        config_fingerprint  VARCHAR(64) NOT NULL
    );
GO
