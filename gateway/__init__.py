"""The one client of Temporal for channels (the API) and operators (the CLI). `gateway` is the door
(`Gateway`, `connect`); its rooms: `creating` (a new action), `controls` (an action's controls),
`conversations` (channel events, the handoff, the stream), `health` (who polls), over `link` (what
they share) and `errors`; `changes` and `kept` read what histories hold without asking a worker."""
