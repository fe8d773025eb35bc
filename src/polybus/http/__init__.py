"""The HTTP front door of `polybus serve`: a sans-IO request parser, routes, responses
(pure), and the asyncio server that turns requests into calls of bound interfaces."""
