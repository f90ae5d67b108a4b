// Command coraza-spoa is the peer of `waf spoa` in corpus/serve-load.sh: an
// HAProxy SPOA agent over Coraza v3 and CRS, built from the components the
// coraza-spoa project uses (github.com/corazawaf/coraza/v3 and
// github.com/dropmorepackets/haproxy-go), because the Go module proxy here
// refuses github.com/corazawaf/coraza-spoa itself.
//
// It answers the same SPOE message as `waf spoa` (connectors/haproxy/
// spoe-waf.conf: `waf-request`) with the same transaction variables
// (`action`, `status`, `rule_id`, `url`, `body_truncated`), so that HAProxy's
// configuration is byte for byte the same for both agents and only the WAF
// differs. Like coraza-spoa, it runs phases 1 and 2 and the logging phase per
// message, and logs matched rules (Coraza's error-log format) to -log.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/types"
	"github.com/dropmorepackets/haproxy-go/pkg/encoding"
	"github.com/dropmorepackets/haproxy-go/spop"
)

type agent struct {
	waf coraza.WAF
}

// request is what one `waf-request` message carries.
type request struct {
	id, method, path, query, version string
	srcIP, dstIP                     netip.Addr
	srcPort, dstPort                 int
	headers, body                    []byte
}

func scan(m *encoding.Message) request {
	var r request
	k := encoding.AcquireKVEntry()
	defer encoding.ReleaseKVEntry(k)
	for m.KV.Next(k) {
		switch {
		case k.NameEquals("id"):
			r.id = string(k.ValueBytes())
		case k.NameEquals("src-ip"):
			r.srcIP = k.ValueAddr()
		case k.NameEquals("src-port"):
			r.srcPort = int(k.ValueInt())
		case k.NameEquals("dst-ip"):
			r.dstIP = k.ValueAddr()
		case k.NameEquals("dst-port"):
			r.dstPort = int(k.ValueInt())
		case k.NameEquals("method"):
			r.method = string(k.ValueBytes())
		case k.NameEquals("path"):
			r.path = string(k.ValueBytes())
		case k.NameEquals("query"):
			r.query = string(k.ValueBytes())
		case k.NameEquals("version"):
			r.version = string(k.ValueBytes())
		case k.NameEquals("headers"):
			r.headers = append([]byte(nil), k.ValueBytes()...)
		case k.NameEquals("body"):
			r.body = append([]byte(nil), k.ValueBytes()...)
		}
	}
	return r
}

// headers decodes HAProxy's req.hdrs_bin: (name, value) pairs of
// varint-prefixed strings, ended by an empty pair.
func headers(b []byte, add func(name, value string)) bool {
	next := func() (string, bool) {
		n, w, err := encoding.Varint(b)
		if err != nil || uint64(len(b)-w) < n {
			return "", false
		}
		s := string(b[w : w+int(n)])
		b = b[w+int(n):]
		return s, true
	}
	for len(b) > 0 {
		name, ok := next()
		if !ok {
			return false
		}
		value, ok := next()
		if !ok {
			return false
		}
		if name == "" && value == "" {
			return true
		}
		add(name, value)
	}
	return true
}

func (a *agent) HandleSPOE(_ context.Context, w *encoding.ActionWriter, m *encoding.Message) {
	if string(m.NameBytes()) != "waf-request" {
		return
	}
	r := scan(m)
	tx := a.waf.NewTransactionWithID(r.id)
	defer tx.Close()
	defer tx.ProcessLogging()
	tx.ProcessConnection(r.srcIP.String(), r.srcPort, r.dstIP.String(), r.dstPort)
	uri := r.path
	if r.query != "" {
		uri += "?" + r.query
	}
	version := r.version
	if version == "" {
		version = "1.1"
	}
	tx.ProcessURI(uri, r.method, "HTTP/"+version)
	contentLength := -1
	headers(r.headers, func(name, value string) {
		if strings.EqualFold(name, "host") {
			tx.SetServerName(value)
		}
		if strings.EqualFold(name, "content-length") {
			if n, err := strconv.Atoi(strings.TrimSpace(value)); err == nil {
				contentLength = n
			}
		}
		tx.AddRequestHeader(name, value)
	})
	it := tx.ProcessRequestHeaders()
	if it == nil {
		if len(r.body) > 0 {
			it, _, _ = tx.WriteRequestBody(r.body)
		}
		if it == nil {
			it, _ = tx.ProcessRequestBody()
		}
	}
	truncated := contentLength > len(r.body)
	_ = w.SetBool(encoding.VarScopeTransaction, "body_truncated", truncated)
	if it == nil {
		_ = w.SetString(encoding.VarScopeTransaction, "action", "allow")
		_ = w.SetUInt32(encoding.VarScopeTransaction, "status", 0)
		_ = w.SetUInt32(encoding.VarScopeTransaction, "rule_id", 0)
		return
	}
	action := "deny"
	switch it.Action {
	case "drop":
		action = "drop"
	case "redirect":
		action = "redirect"
		_ = w.SetString(encoding.VarScopeTransaction, "url", it.Data)
	}
	_ = w.SetString(encoding.VarScopeTransaction, "action", action)
	_ = w.SetUInt32(encoding.VarScopeTransaction, "status", uint32(it.Status))
	_ = w.SetUInt32(encoding.VarScopeTransaction, "rule_id", uint32(it.RuleID))
}

func main() {
	listen := flag.String("listen", "127.0.0.1:12345", "address to listen on")
	rules := flag.String("rules", "", "SecLang file to load (Include and @pmFromFile resolve against its directory)")
	logPath := flag.String("log", "", "error log (matched rules); none when empty")
	flag.Parse()
	if *rules == "" {
		fmt.Fprintln(os.Stderr, "coraza-spoa: -rules FILE is required")
		os.Exit(2)
	}
	cfg := coraza.NewWAFConfig().WithDirectivesFromFile(*rules)
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "coraza-spoa:", err)
			os.Exit(1)
		}
		out := bufio.NewWriter(f)
		var mu sync.Mutex
		cfg = cfg.WithErrorCallback(func(rule types.MatchedRule) {
			mu.Lock()
			defer mu.Unlock()
			_, _ = out.WriteString(rule.ErrorLog() + "\n")
			_ = out.Flush()
		})
	}
	waf, err := coraza.NewWAF(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "coraza-spoa: rules:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := spop.Agent{Addr: *listen, Handler: &agent{waf: waf}, BaseContext: ctx}
	fmt.Fprintln(os.Stderr, "coraza-spoa: listening on", *listen)
	if err := a.ListenAndServe(); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "coraza-spoa:", err)
		os.Exit(1)
	}
}
