"""What a running part needs: settings from the environment (`config`), JSON log lines (`logs`), and
the one stack starter (`stack`: the dev server, worker, API and sandbox as processes)."""
