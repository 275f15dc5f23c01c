package tts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// HostClientConfig configures a HostClient.
type HostClientConfig struct {
	// Name is the engine name the client reports ("indextts", "bench"); default
	// "indextts".
	Name string
	// Address of the host: "unix:/path/to/host.sock" (also "unix:///path"), or
	// "http://127.0.0.1:7001", or a bare "127.0.0.1:7001".
	Address string
	// HTTPClient overrides the client built from Address (tests). Its transport must
	// reach the host; Address then only supplies the URL.
	HTTPClient *http.Client
}

// HostClient is an Engine that talks to a model host over the protocol in
// docs/engines.md. It is safe for concurrent use; the host decides how many requests
// it runs at once (HostInfo.Concurrency) and queues the rest.
type HostClient struct {
	name    string
	baseURL string
	hc      *http.Client
}

var _ Engine = (*HostClient)(nil)

// NewHostClient returns a client for the host at cfg.Address. It does not connect.
func NewHostClient(cfg HostClientConfig) (*HostClient, error) {
	name := cfg.Name
	if name == "" {
		name = "indextts"
	}
	c := &HostClient{name: name, hc: cfg.HTTPClient}
	addr := strings.TrimSpace(cfg.Address)
	switch {
	case strings.HasPrefix(addr, "unix:"):
		path := strings.TrimPrefix(strings.TrimPrefix(addr, "unix:"), "//")
		if path == "" {
			return nil, fmt.Errorf("host address %q has no socket path", cfg.Address)
		}
		c.baseURL = "http://model-host"
		if c.hc == nil {
			tr := &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "unix", path)
				},
				MaxIdleConnsPerHost: 4,
				IdleConnTimeout:     time.Minute,
			}
			c.hc = &http.Client{Transport: tr}
		}
	case strings.HasPrefix(addr, "http://"):
		c.baseURL = strings.TrimRight(addr, "/")
	case addr != "" && !strings.Contains(addr, "://"):
		c.baseURL = "http://" + strings.TrimRight(addr, "/")
	default:
		return nil, fmt.Errorf("host address %q: want unix:/path or http://host:port", cfg.Address)
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}}
	}
	return c, nil
}

// Name returns the engine name from the config.
func (c *HostClient) Name() string { return c.name }

// Health returns the host's GET /health document. A host that is still loading its
// model answers with CodeUnavailable.
func (c *HostClient) Health(ctx context.Context) (HealthResponse, error) {
	var h HealthResponse
	if err := c.call(ctx, http.MethodGet, PathHealth, nil, &h); err != nil {
		return h, err
	}
	if h.Protocol < MinProtocolVersion || h.Protocol > ProtocolVersion {
		return h, &Error{Code: CodeInternal, Message: fmt.Sprintf("host speaks protocol %d, want %d to %d", h.Protocol, MinProtocolVersion, ProtocolVersion)}
	}
	if h.Protocol == 1 && h.Batch != nil {
		return h, &Error{Code: CodeInternal, Message: "host speaks protocol 1 but reports a batch: batching needs protocol 2"}
	}
	return h, nil
}

// Info returns the host's model and capabilities.
func (c *HostClient) Info(ctx context.Context) (HostInfo, error) {
	h, err := c.Health(ctx)
	return h.HostInfo, err
}

// WaitHealthy polls /health every interval until the host answers, ctx ends, or the
// host reports an error other than CodeUnavailable (still loading, not yet listening).
func (c *HostClient) WaitHealthy(ctx context.Context, interval time.Duration) (HealthResponse, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		h, err := c.Health(ctx)
		if err == nil || !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			return h, err
		}
		select {
		case <-ctx.Done():
			return h, fmt.Errorf("waiting for model host: %w (last error: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// PrepareSpeaker asks the host to compute or load a speaker's conditioning.
func (c *HostClient) PrepareSpeaker(ctx context.Context, req PrepareRequest) (PrepareResult, error) {
	var res PrepareResult
	if req.ReferenceAudioPath == "" {
		return res, invalidf("reference audio path is empty")
	}
	err := c.call(ctx, http.MethodPost, PathPrepare, req, &res)
	return res, err
}

// Synthesize validates and normalizes req and has the host render it.
func (c *HostClient) Synthesize(ctx context.Context, req Request) (Result, error) {
	var res Result
	req, err := req.Normalize()
	if err != nil {
		return res, err
	}
	if err := c.call(ctx, http.MethodPost, PathSynthesize, req, &res); err != nil {
		return res, err
	}
	if res.Engine == "" {
		res.Engine = c.name
	}
	if res.OutputPath == "" {
		res.OutputPath = req.OutputPath
	}
	return res, nil
}

// ReleaseCache has the host give its caching allocator's unused memory back to the
// device (torch.cuda.empty_cache).
func (c *HostClient) ReleaseCache(ctx context.Context) (ReleaseCacheResult, error) {
	var res ReleaseCacheResult
	err := c.call(ctx, http.MethodPost, PathReleaseCache, struct{}{}, &res)
	return res, err
}

// Close releases idle connections. It does not stop the host process.
func (c *HostClient) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// call sends one request and decodes the answer into out. Transport failures are
// CodeUnavailable; a cancelled or expired ctx is returned as ctx's error, wrapped.
func (c *HostClient) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return &Error{Code: CodeInvalidInput, Message: "encoding request", Err: err}
		}
		body = bytes.NewReader(b)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, body)
	if err != nil {
		return &Error{Code: CodeInternal, Message: "building request", Err: err}
	}
	if in != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	hreq.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(hreq)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("model host %s %s: %w", method, path, ctxErr)
		}
		return &Error{Code: CodeUnavailable, Message: fmt.Sprintf("model host %s %s", method, path), Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("model host %s %s: %w", method, path, ctxErr)
		}
		// The host went away in the middle of its answer: it crashed.
		return &Error{Code: CodeUnavailable, Message: fmt.Sprintf("reading model host answer to %s", path), Err: err}
	}
	if len(data) > maxResponseBytes {
		return &Error{Code: CodeInternal, Message: fmt.Sprintf("model host answer to %s is larger than %d bytes", path, maxResponseBytes)}
	}
	return decodeResponse(resp.StatusCode, resp.Header.Get("Content-Type"), data, out)
}
