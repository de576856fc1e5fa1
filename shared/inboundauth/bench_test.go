package inboundauth_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/inboundauth"
)

// BenchmarkHMACVerify measures the hmac check of one request, accepted and refused, for bodies
// of several sizes.
func BenchmarkHMACVerify(b *testing.B) {
	now := time.UnixMilli(1700000000000)
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	for _, alg := range []struct {
		name inboundauth.Algorithm
		hash func() hash.Hash
	}{{inboundauth.HmacSHA256, sha256.New}, {inboundauth.HmacSHA512, sha512.New}} {
		for _, format := range []inboundauth.PayloadFormat{inboundauth.PayloadBody, inboundauth.PayloadTimestampDotBody} {
			for _, size := range []int{256, 4 << 10, 64 << 10} {
				body := make([]byte, size)
				for i := range body {
					body[i] = byte('a' + i%26)
				}
				auth := hmacAuth("bench-secret", func(h *inboundauth.HMAC) {
					h.Algorithm = alg.name
					h.TimestampHeader = "X-Timestamp"
					h.SignaturePayloadFormat = format
				})
				v, err := inboundauth.New(auth)
				if err != nil {
					b.Fatal(err)
				}
				mac := hmac.New(alg.hash, []byte("bench-secret"))
				if format == inboundauth.PayloadTimestampDotBody {
					mac.Write([]byte(ts + "."))
				}
				mac.Write(body)
				sig := hex.EncodeToString(mac.Sum(nil))
				good := headers("X-Timestamp", ts, "X-Signature", "sha256="+sig)
				bad := headers("X-Timestamp", ts, "X-Signature", "sha256="+flip(sig))
				for _, c := range []struct {
					name   string
					header map[string][]string
					accept bool
				}{{"accepted", good, true}, {"refused", bad, false}} {
					b.Run(fmt.Sprintf("%s/%s/%dB/%s", alg.name, format, size, c.name), func(b *testing.B) {
						b.SetBytes(int64(size))
						b.ReportAllocs()
						for b.Loop() {
							err := v.Verify(c.header, body, now)
							if (err == nil) != c.accept {
								b.Fatalf("accept %v, got %v", c.accept, err)
							}
						}
					})
				}
			}
		}
	}
}
