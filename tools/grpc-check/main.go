// grpc-check: a real gRPC server and client (grpc-go's health service, no
// generated code needed) for corpus/serve-grpc.sh, which runs gRPC calls
// through `waf serve` with CRS in front of the server.
//
//	grpc-check serve ADDR             serves grpc.health.v1.Health, "shop.Cart" SERVING
//	grpc-check call ADDR SERVICE [AUTHORITY]
//	                                  one Check call (with that :authority);
//	                                  prints "SERVING", or "error CODE: MESSAGE"
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: grpc-check serve ADDR | grpc-check call ADDR SERVICE [AUTHORITY]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		l, err := net.Listen("tcp", os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		s := grpc.NewServer()
		h := health.NewServer()
		h.SetServingStatus("shop.Cart", healthpb.HealthCheckResponse_SERVING)
		healthpb.RegisterHealthServer(s, h)
		if err := s.Serve(l); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "call":
		if len(os.Args) < 4 {
			os.Exit(2)
		}
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if len(os.Args) > 4 {
			opts = append(opts, grpc.WithAuthority(os.Args[4]))
		}
		conn, err := grpc.NewClient(os.Args[2], opts...)
		if err != nil {
			fmt.Println("error dial:", err)
			os.Exit(1)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: os.Args[3]})
		if err != nil {
			st, _ := status.FromError(err)
			fmt.Printf("error %s: %s\n", st.Code(), st.Message())
			return
		}
		fmt.Println(r.GetStatus())
	default:
		os.Exit(2)
	}
}
