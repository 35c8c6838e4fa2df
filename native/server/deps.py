"""FastAPI dependencies shared by the route modules."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from .pool import ModelPool
from .service import Service


def get_service(request: Request) -> Service:
    """The Service the app was created with."""
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(get_service)]


def get_pool(request: Request) -> ModelPool:
    """The models the app answers for by name."""
    return request.app.state.pool


PoolDep = Annotated[ModelPool, Depends(get_pool)]
