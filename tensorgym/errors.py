"""The root of every error a user of tensorgym can cause.

Everything tensorgym raises because of what it was asked to do (an unknown
env id, a shape that cannot be computed, a config outside its space, a
database file that is not a tensorgym database, a missing catalogue ...) is a
:class:`TensorgymError`, so one ``except TensorgymError`` turns any of them
into a message; the command line prints it on one line and exits with code 2.
The subclasses also derive from the built-in exception a Python user expects
(``ValueError`` for bad values and unknown names, ``TypeError`` for wrong
types), so existing ``except ValueError`` handlers keep working.

Faults of a *kernel* (it fails to build, crashes, hangs, computes a wrong
result) are never exceptions: they become records with a status.
"""

from __future__ import annotations


class TensorgymError(Exception):
    """Something the caller asked for cannot be done; the message says what to do instead."""


class UnknownNameError(TensorgymError, ValueError):
    """A name (of a space, agent, env id, library ...) that tensorgym does not know."""


class InvalidArgumentError(TensorgymError, ValueError):
    """An argument has a value tensorgym cannot use (a budget of 0, a NaN time limit ...)."""


class InvalidTypeError(TensorgymError, TypeError):
    """An argument has a type tensorgym cannot use."""
