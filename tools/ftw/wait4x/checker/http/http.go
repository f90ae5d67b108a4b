// Package http checks that an HTTP endpoint answers, with the expected status
// code when one is given. Body, header, JSON and XPath expectations are
// accepted for API compatibility and checked where cheap (regex, header
// presence); JSON and XPath expectations are not supported and fail the check.
package http

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	nethttp "net/http"
	"regexp"
	"strings"
	"time"
)

const (
	DefaultInsecureSkipTLSVerify = false
	DefaultConnectionTimeout     = 3 * time.Second
	DefaultNoRedirect            = false
)

type HTTP struct {
	address    string
	status     int
	bodyRegex  string
	bodyJSON   string
	bodyXPath  string
	header     string
	timeout    time.Duration
	insecure   bool
	noRedirect bool
}

type Option func(*HTTP)

func WithExpectStatusCode(c int) Option      { return func(h *HTTP) { h.status = c } }
func WithExpectBodyRegex(r string) Option     { return func(h *HTTP) { h.bodyRegex = r } }
func WithExpectBodyJSON(j string) Option      { return func(h *HTTP) { h.bodyJSON = j } }
func WithExpectBodyXPath(x string) Option     { return func(h *HTTP) { h.bodyXPath = x } }
func WithExpectHeader(s string) Option        { return func(h *HTTP) { h.header = s } }
func WithTimeout(d time.Duration) Option      { return func(h *HTTP) { h.timeout = d } }
func WithInsecureSkipTLSVerify(b bool) Option { return func(h *HTTP) { h.insecure = b } }
func WithNoRedirect(b bool) Option            { return func(h *HTTP) { h.noRedirect = b } }

func New(address string, opts ...Option) *HTTP {
	h := &HTTP{address: address, timeout: DefaultConnectionTimeout}
	for _, o := range opts {
		o(h)
	}
	return h
}

func (h *HTTP) Identity() (string, error) { return h.address, nil }

func (h *HTTP) Check(ctx context.Context) error {
	if h.bodyJSON != "" || h.bodyXPath != "" {
		return errors.New("wait4x shim: JSON and XPath body expectations are not supported")
	}
	client := &nethttp.Client{
		Timeout:   h.timeout,
		Transport: &nethttp.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: h.insecure}},
	}
	if h.noRedirect {
		client.CheckRedirect = func(*nethttp.Request, []*nethttp.Request) error { return nethttp.ErrUseLastResponse }
	}
	req, err := nethttp.NewRequestWithContext(ctx, nethttp.MethodGet, h.address, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if h.status != 0 && resp.StatusCode != h.status {
		return fmt.Errorf("status %d, expected %d", resp.StatusCode, h.status)
	}
	if h.header != "" {
		name, value, _ := strings.Cut(h.header, "=")
		got := resp.Header.Get(name)
		if got == "" || (value != "" && !regexp.MustCompile(value).MatchString(got)) {
			return fmt.Errorf("header %q not as expected", h.header)
		}
	}
	if h.bodyRegex != "" {
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return err
		}
		re, err := regexp.Compile(h.bodyRegex)
		if err != nil {
			return err
		}
		if !re.Match(body) {
			return errors.New("body does not match")
		}
	}
	return nil
}
