// Command receiver is the demo HTTP receiver of `make run`: it answers 200 to every request
// and prints one line per request, `delivered POST /webhook {"orderId":"1001"}`, like the
// receiver of the tutorial in spec/32-deliver-your-first-outbox-message.md.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sort"
	"strings"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8088", "the address to listen on")
	headers := flag.Bool("headers", false, "also print the X- headers of each request")
	flag.Parse()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "reading body", http.StatusBadRequest)
			return
		}
		var compact bytes.Buffer
		if json.Compact(&compact, body) != nil {
			compact.Reset()
			compact.Write(body)
		}
		line := fmt.Sprintf("delivered %s %s %s", r.Method, r.URL.Path, compact.String())
		if *headers {
			var names []string
			for name := range r.Header {
				if strings.HasPrefix(name, "X-") {
					names = append(names, name)
				}
			}
			sort.Strings(names)
			for _, name := range names {
				line += fmt.Sprintf(" %s=%s", name, strings.Join(r.Header[name], ","))
			}
		}
		fmt.Fprintln(os.Stdout, line)
		w.WriteHeader(http.StatusOK)
	})
	fmt.Fprintf(os.Stdout, "receiver listening on %s\n", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}
