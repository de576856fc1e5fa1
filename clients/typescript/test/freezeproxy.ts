// A TCP proxy that imitates a network partition between a worker and PostgreSQL: when frozen it
// stops passing bytes in both directions, on every connection, without closing any of them,
// and holds new connections unanswered; when thawed it passes everything it held, in order. It
// can also freeze itself when the server sends bytes that hold a marker, or just after the client
// sent bytes that hold one, so a test can hold back the answer of one statement that the server
// runs.
import net from "node:net";

/** One direction of one connection: the chunks it holds while the proxy is frozen. */
interface Pipe {
  readonly from: net.Socket;
  readonly to: net.Socket;
  readonly fromServer: boolean;
  held: Buffer[];
  /** The end of the bytes seen so far, so that a marker split between two chunks is found. */
  tail: Buffer;
  ended: boolean;
}

export class FreezeProxy {
  readonly #server: net.Server;
  readonly #target: { host: string; port: number };
  readonly #pipes = new Set<Pipe>();
  readonly #sockets = new Set<net.Socket>();
  /** Connections accepted while frozen, to open once thawed. */
  #waiting: net.Socket[] = [];
  #frozen = false;
  #marker: Buffer | undefined;
  #after: Buffer | undefined;

  private constructor(server: net.Server, target: { host: string; port: number }) {
    this.#server = server;
    this.#target = target;
  }

  /** Listens on a free port of 127.0.0.1 and forwards each connection to the target. */
  static async start(target: { host: string; port: number }): Promise<FreezeProxy> {
    const server = net.createServer();
    const proxy = new FreezeProxy(server, target);
    server.on("connection", (client) => proxy.#accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    return proxy;
  }

  /** The port to connect to instead of the target's. */
  get port(): number {
    return (this.#server.address() as net.AddressInfo).port;
  }

  get frozen(): boolean {
    return this.#frozen;
  }

  /** Stops passing bytes, at once, on every connection and for new ones. */
  freeze(): void {
    this.#frozen = true;
  }

  /** Freezes when the server sends bytes that contain `marker`: that chunk and everything after it wait. */
  freezeOnReply(marker: string): void {
    this.#marker = Buffer.from(marker);
  }

  /**
   * Freezes once the client has sent bytes that contain `marker`: that chunk reaches the
   * server, and the server's answer, like everything else, waits.
   */
  freezeAfterRequest(marker: string): void {
    this.#after = Buffer.from(marker);
  }

  /** Passes what the proxy held and everything after it; forgets the markers. */
  thaw(): void {
    this.#frozen = false;
    this.#marker = undefined;
    this.#after = undefined;
    for (const pipe of this.#pipes) {
      this.#flush(pipe);
    }
    for (const client of this.#waiting.splice(0)) {
      this.#open(client);
    }
  }

  /** Thaws, stops listening and closes every connection. */
  async close(): Promise<void> {
    this.thaw();
    for (const socket of this.#sockets) {
      socket.destroy();
    }
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: net.Socket): void {
    this.#sockets.add(client);
    client.on("error", () => undefined);
    client.pause();
    if (this.#frozen) {
      this.#waiting.push(client);
      return;
    }
    this.#open(client);
  }

  #open(client: net.Socket): void {
    if (client.destroyed) {
      return;
    }
    const server = net.connect(this.#target.port, this.#target.host);
    this.#sockets.add(server);
    server.on("error", () => undefined);
    this.#pipe(client, server, false);
    this.#pipe(server, client, true);
    client.resume();
  }

  #pipe(from: net.Socket, to: net.Socket, fromServer: boolean): void {
    const pipe: Pipe = { from, to, fromServer, held: [], tail: Buffer.alloc(0), ended: false };
    this.#pipes.add(pipe);
    from.on("data", (chunk: Buffer) => {
      const seen = Buffer.concat([pipe.tail, chunk]);
      pipe.tail = seen.subarray(Math.max(0, seen.length - 256));
      if (fromServer && this.#marker !== undefined && seen.includes(this.#marker)) {
        this.#marker = undefined;
        this.#frozen = true;
      }
      pipe.held.push(chunk);
      this.#flush(pipe);
      if (!fromServer && this.#after !== undefined && seen.includes(this.#after)) {
        this.#after = undefined;
        this.#frozen = true;
      }
    });
    // Across a partition the other side does not learn that a connection ended: pass the end
    // on only once the proxy passes bytes again.
    from.on("close", () => {
      pipe.ended = true;
      this.#flush(pipe);
    });
  }

  #flush(pipe: Pipe): void {
    if (this.#frozen) {
      return;
    }
    for (const chunk of pipe.held.splice(0)) {
      if (!pipe.to.destroyed) {
        pipe.to.write(chunk);
      }
    }
    if (pipe.ended) {
      this.#pipes.delete(pipe);
      pipe.to.end();
    }
  }
}
