"""What a child process runs to interrupt a kernel call the way Ctrl-C does."""

# A child's `interrupted(call, *args)`: whether call(*args) raised KeyboardInterrupt while the
# process was sent SIGINT every 5 ms (needs os, signal, threading).
INTERRUPTED = """
def interrupted(call, *args):
    done = threading.Event()
    def ring():
        while not done.wait(0.005):
            os.kill(os.getpid(), signal.SIGINT)
    ringer = threading.Thread(target=ring)
    ringer.start()
    try:
        call(*args)
    except KeyboardInterrupt:
        return True
    finally:
        done.set()
        ringer.join()
    return False
"""
